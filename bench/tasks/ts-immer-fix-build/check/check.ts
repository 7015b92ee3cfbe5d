import { check, done } from "./helpers"
const immer = require("../src/immer")
const frozen = immer.freeze({a: {b: 1}}, true)
check("deep freeze freezes", Object.isFrozen(frozen.a))
check("setAutoFreeze is a function", typeof immer.setAutoFreeze === "function")
check("current works in a producer", immer.produce({n: 1}, (d: any) => { d.n = 2; check("current sees 2", immer.current(d).n === 2) }).n === 2)
done()
