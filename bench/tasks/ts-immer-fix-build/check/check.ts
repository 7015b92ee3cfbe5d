(globalThis as any).__DEV__ = true
const immer = require("../src/immer")
let failed = 0
function check(what: string, ok: boolean) {
	if (!ok) {
		failed++
		console.error("FAIL " + what)
	}
}
const frozen = immer.freeze({a: {b: 1}}, true)
check("deep freeze freezes", Object.isFrozen(frozen.a))
check("setAutoFreeze is a function", typeof immer.setAutoFreeze === "function")
check("current works in a producer", immer.produce({n: 1}, (d: any) => { d.n = 2; check("current sees 2", immer.current(d).n === 2) }).n === 2)
if (failed) throw new Error(failed + " checks failed")
console.log("all checks passed")
