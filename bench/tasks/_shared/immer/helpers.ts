// What every immer task's check.ts starts from: immer's globals set, and
// a check() that counts failures.
;(globalThis as any).__DEV__ = true
let failed = 0
export function check(what: string, ok: boolean) {
	if (!ok) {
		failed++
		console.error("FAIL " + what)
	}
}
export function done() {
	if (failed) throw new Error(failed + " checks failed")
	console.log("all checks passed")
}
