(globalThis as any).__DEV__ = true
const immer = require("../src/immer")
let failed = 0
function check(what: string, ok: boolean) {
	if (!ok) {
		failed++
		console.error("FAIL " + what)
	}
}
check("a plain value comes back", immer.currentOrSelf(5) === 5)
const obj = {a: 1}
check("a plain object comes back as is", immer.currentOrSelf(obj) === obj)
immer.produce({a: 1}, (d: any) => {
	d.a = 3
	const snap = immer.currentOrSelf(d)
	check("a draft gives its current state", snap.a === 3 && !immer.isDraft(snap))
})
if (failed) throw new Error(failed + " checks failed")
console.log("all checks passed")
