import { check, done } from "./helpers"
const immer = require("../src/immer")
check("canDraft is exported", typeof immer.canDraft === "function")
check("plain objects can be drafted", immer.canDraft({a: 1}) === true)
check("numbers cannot", immer.canDraft(3) === false)
check("produce still works", immer.produce({x: [1]}, (d: any) => { d.x.push(2) }).x.length === 2)
done()
