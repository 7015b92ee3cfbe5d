(globalThis as any).__DEV__ = true
const immer = require("../src/immer")
let failed = 0
function check(what: string, ok: boolean) {
	if (!ok) {
		failed++
		console.error("FAIL " + what)
	}
}
const base = {a: NaN, b: 0, c: {d: 1}}
check("NaN assigned NaN keeps the base", immer.produce(base, (d: any) => { d.a = NaN }) === base)
check("-0 over +0 is a change", immer.produce(base, (d: any) => { d.b = -0 }) !== base)
check("a real change makes a new object", immer.produce(base, (d: any) => { d.c.d = 2 }).c.d === 2)
if (failed) throw new Error(failed + " checks failed")
console.log("all checks passed")
