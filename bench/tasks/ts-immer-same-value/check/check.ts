import { check, done } from "./helpers"
const immer = require("../src/immer")
const base = {a: NaN, b: 0, c: {d: 1}}
check("NaN assigned NaN keeps the base", immer.produce(base, (d: any) => { d.a = NaN }) === base)
check("-0 over +0 is a change", immer.produce(base, (d: any) => { d.b = -0 }) !== base)
check("a real change makes a new object", immer.produce(base, (d: any) => { d.c.d = 2 }).c.d === 2)
done()
