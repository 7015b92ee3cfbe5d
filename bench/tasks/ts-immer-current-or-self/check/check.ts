import { check, done } from "./helpers"
const immer = require("../src/immer")
check("a plain value comes back", immer.currentOrSelf(5) === 5)
const obj = {a: 1}
check("a plain object comes back as is", immer.currentOrSelf(obj) === obj)
immer.produce({a: 1}, (d: any) => {
	d.a = 3
	const snap = immer.currentOrSelf(d)
	check("a draft gives its current state", snap.a === 3 && !immer.isDraft(snap))
})
done()
