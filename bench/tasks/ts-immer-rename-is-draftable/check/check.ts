(globalThis as any).__DEV__ = true
const immer = require("../src/immer")
let failed = 0
function check(what: string, ok: boolean) {
	if (!ok) {
		failed++
		console.error("FAIL " + what)
	}
}
check("canDraft is exported", typeof immer.canDraft === "function")
check("plain objects can be drafted", immer.canDraft({a: 1}) === true)
check("numbers cannot", immer.canDraft(3) === false)
check("produce still works", immer.produce({x: [1]}, (d: any) => { d.x.push(2) }).x.length === 2)
if (failed) throw new Error(failed + " checks failed")
console.log("all checks passed")
