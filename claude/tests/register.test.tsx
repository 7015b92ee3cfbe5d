import { expect, test } from 'claude-code/testing'

import { bandWith, foldedDiff, parseStatus } from '../hooks/status'

// nib's status as `nibash_status` with format json answers it (Stop and
// Restore go to `nibash_control`, which answers plain lines): a call the
// agent waits for, a job, a job that ended, the trash, names, usage, seen.
const STATUS = {
  exe: '/opt/nib/bin/nib',
  project: '/work/app',
  sandbox: 'landlock, seccomp',
  calls: [
    { id: 1, command: 'cargo test', description: null, seconds: 12, state: 'running', ending: null, tail: ['running 12 tests'] },
    { id: 3, command: 'npm run dev', description: 'dev server', seconds: 75, state: 'job', ending: null, tail: ['ready on :5173'] },
  ],
  trash: [{ path: 'old/notes.md', deleted: '2026-12-03T07:00:00' }],
  names: [{ name: 'server', dir: 'packages/server', source: 'auto' }],
  usage: [
    { agent: 'main', tool: 'read', calls: 3, chars: 1200 },
    { agent: 'main', tool: 'nibash', calls: 2, chars: 5400 },
  ],
  seen: [{ path: 'src/lib.rs', tag: '1A2B', lines: 40, seen: [[1, 10], [20, 20]] }],
}

const ENDED = {
  ...STATUS,
  calls: [{ ...STATUS.calls[1], state: 'ended', ending: 'exited 1', seconds: 80 }],
}

const DIFF = '--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n fn main() {\n-    old();\n+    new();\n'

const PANE = (requestId: string) =>
  ({
    plugin: 'nib',
    component: 'Pane',
    requestId,
    props: {
      title: requestId,
      isFocused: false,
      bodyColumns: 80,
      placement: 'dock',
      scroll: { offset: 0, bodyRows: 30 },
      view: {},
    },
  }) as const

type Engine = {
  statuses: unknown[]
  /** Each MCP call the mod made: the tool, then its arguments. */
  mcp: [string, Record<string, unknown>][]
  runs: string[][]
  toasts: string[]
}

/** Stands for Claude Code and nib beneath the mod. */
function engine(on: any, statuses: unknown[], toolCall?: (...a: any[]) => unknown): Engine {
  const seen: Engine = { statuses: [...statuses], mcp: [], runs: [], toasts: [] }
  on('session.start', (_: unknown, e: any) => ({ cwd: e.cwd }))
  on('command.register', (_: unknown, e: any) => ({ value: { command: e.name } }))
  on('ui.open', () => ({ value: { isPlaced: true } }))
  on('clock.every', () => ({ value: {} }))
  // What Claude Code itself draws where the mod leaves a site alone.
  on('ui.render', ($: any, e: any) => {
    const { Text } = $.ui.resolve(e)
    return <Text>engine</Text>
  })
  on('ui.toast', (_: unknown, e: any) => {
    seen.toasts.push(typeof e === 'string' ? e : (e.text ?? e.message ?? JSON.stringify(e)))
    return { value: undefined }
  })
  on('mcp.call', (_: unknown, e: any) => {
    seen.mcp.push([e.tool, e.args ?? {}])
    if (e.tool === 'nibash_control') {
      // What nib's control answers: plain lines, control bytes and all.
      const text = e.args?.stop ? `stopped ${e.args.stop}: npm run dev \u001b[2J\n` : `restored ${e.args?.restore}\n`
      return { value: { content: [{ type: 'text', text }], isError: false } }
    }
    const doc = seen.statuses.length > 1 ? seen.statuses.shift() : seen.statuses[0]
    return { value: { content: [{ type: 'text', text: JSON.stringify(doc) }], isError: false } }
  })
  on('process.run', (_: unknown, e: any) => {
    const argv: string[] = e.argv
    seen.runs.push(argv)
    const rest = argv.slice(1).join(' ')
    const stdout =
      rest === 'undo --diff'
        ? DIFF
        : rest === 'undo --list'
          ? '1: edit 1m ago: src/lib.rs\n2: write 5m ago: notes.txt\nnib undo N puts change N back (1, the newest, without N)\n'
          : rest.startsWith('undo ')
            ? `src/lib.rs: put back as it was (change ${argv[2]})\n`
            : ''
    return { value: { stdout, stderr: '', exitCode: 0 } }
  })
  on('tool.call', toolCall ?? (() => ({ result: { content: [{ type: 'text', text: '[src/lib.rs#3C4D]\n2:    new();' }] } })))
  return seen
}

async function started($: any, on: any, statuses: unknown[]): Promise<Engine> {
  const seen = engine(on, statuses)
  await $.session.start({ cwd: '/work/app', surface: 'terminal', isInteractive: true })
  // A nib call makes the mod read nib's status.
  await $.tool.call({ tool: 'mcp__nib__read', paths: ['src/lib.rs'] })
  return seen
}

test('the band names the running call and the job', async ($, on) => {
  await started($, on, [STATUS])
  const ui = await $.ui.mount({
    plugin: 'nib',
    surface: 'terminal',
    component: 'AbovePrompt',
    props: { hasSurvey: false, isCollapsed: false, isWorking: true, maxRows: 3, bodyColumns: 100, scroll: { offset: 0, bodyRows: 3 }, view: {} },
  })
  const band = await ui.find({ type: 'Text', text: /^nib:/ })
  expect(band?.text).toBe('nib: running cargo test (12s); 1 job %3 npm run dev')
  await ui.unmount()
})

test('with nothing running the band is left to Claude Code', async ($, on) => {
  await started($, on, [{ ...STATUS, calls: [] }])
  const ui = await $.ui.mount({
    plugin: 'nib',
    surface: 'terminal',
    component: 'AbovePrompt',
    props: { hasSurvey: false, isCollapsed: false, isWorking: false, maxRows: 3, bodyColumns: 100, scroll: { offset: 0, bodyRows: 3 }, view: {} },
  })
  expect(await ui.find({ type: 'Text', text: /^nib:/ })).toBeUndefined()
  expect((await ui.find({ type: 'Text', text: /engine/ }))?.text).toBe('engine')
  await ui.unmount()
})

test('a toast says when a job ends', async ($, on) => {
  const seen = await started($, on, [STATUS, ENDED])
  expect(seen.toasts).toEqual([])
  await $.tool.call({ tool: 'mcp__nib__nibash_status' })
  expect(seen.toasts).toEqual(['nib: job %3 exited 1: npm run dev'])
})

test('/nibash lists calls with their last lines, and Stop stops the job', async ($, on) => {
  const seen = await started($, on, [STATUS])
  const ui = await $.ui.mount({ ...PANE('nibash'), surface: 'terminal' })
  expect((await ui.find({ type: 'Text', text: /%3 job/ }))?.text).toBe('%3 job 1m: npm run dev')
  expect((await ui.find({ type: 'Text', text: /ready on/ }))?.text).toBe('  | ready on :5173')
  await ui.press({ key: 'stop-3' })
  // Stop goes to nibash_control (not the read-only status), then the status is read again.
  const at = seen.mcp.findIndex(([tool]) => tool === 'nibash_control')
  expect(seen.mcp[at]).toEqual(['nibash_control', { stop: '%3' }])
  expect(seen.mcp.slice(at + 1).some(([tool]) => tool === 'nibash_status')).toBe(true)
  expect(seen.mcp.filter(([tool]) => tool === 'nibash_status').some(([, a]) => 'stop' in a || 'restore' in a)).toBe(false)
  expect((await ui.find({ type: 'Text', text: /stopped %3/ }))?.text).toBe('stopped %3: npm run dev \\x1b[2J')
  await ui.unmount()
})

test('/trash lists entries and Restore puts one back', async ($, on) => {
  const seen = await started($, on, [STATUS])
  const ui = await $.ui.mount({ ...PANE('trash'), surface: 'terminal' })
  expect((await ui.find({ type: 'Text', text: /old\/notes\.md/ }))?.text).toContain('old/notes.md')
  await ui.press({ key: 'restore-old/notes.md' })
  const at = seen.mcp.findIndex(([tool]) => tool === 'nibash_control')
  expect(seen.mcp[at]).toEqual(['nibash_control', { restore: 'old/notes.md' }])
  expect(seen.mcp.slice(at + 1).some(([tool]) => tool === 'nibash_status')).toBe(true)
  expect((await ui.find({ type: 'Text', text: /restored/ }))?.text).toBe('restored old/notes.md')
  await ui.unmount()
})

test('/tokens, /names and /seen show what nib counts', async ($, on) => {
  await started($, on, [STATUS])
  const tokens = await $.ui.mount({ ...PANE('tokens'), surface: 'terminal' })
  expect((await tokens.find({ type: 'Text', text: /this session/ }))?.text).toBe('characters returned this session: 6600')
  expect((await tokens.find({ type: 'Text', text: /nibash/ }))?.text).toBe('main nibash: 5400 in 2 calls')
  await tokens.unmount()
  const names = await $.ui.mount({ ...PANE('names'), surface: 'terminal' })
  expect((await names.find({ type: 'Text', text: /~server/ }))?.text).toContain('~server = packages/server')
  await names.unmount()
  const seen = await $.ui.mount({ ...PANE('seen'), surface: 'terminal' })
  expect((await seen.find({ type: 'Text', text: /lib\.rs/ }))?.text).toBe('src/lib.rs#1A2B: 11 of 40 lines (1-10, 20)')
  await seen.unmount()
})

test("a nib edit's row shows its diff; other rows are the engine's", async ($, on) => {
  const seen = await started($, on, [STATUS])
  await $.tool.call({ tool: 'mcp__nib__edit', tool_use_id: 'toolu_7', patch: '[src/lib.rs#1A2B]\nSET 2:    new();' })
  expect(seen.runs.at(-1)).toEqual(['/opt/nib/bin/nib', 'undo', '--diff'])
  const row = await $.ui.mount({
    plugin: 'nib',
    surface: 'terminal',
    component: 'ToolResult',
    props: { tool_use_id: 'toolu_7', tool: 'mcp__nib__edit', output: 'ok', isErrored: false },
  })
  expect((await row.find({ type: 'Text', text: /^\+ / }))?.text).toBe('+    new();')
  expect((await row.find({ type: 'Text', text: /^- / }))?.text).toBe('-    old();')
  await row.unmount()
  const other = await $.ui.mount({
    plugin: 'nib',
    surface: 'terminal',
    component: 'ToolResult',
    props: { tool_use_id: 'toolu_8', tool: 'Bash', output: 'ok', isErrored: false },
  })
  expect(await other.find({ type: 'Text', text: /^\+/ })).toBeUndefined()
  expect((await other.find({ type: 'Text', text: /engine/ }))?.text).toBe('engine')
  await other.unmount()
})

test('/nib-undo puts back the last change, and its list has an Undo button per change', async ($, on) => {
  const seen = await started($, on, [STATUS])
  const done = await $.command.run({ command: 'nib-undo', args: '', origin: { kind: 'composer' } } as any)
  expect(seen.runs).toContainEqual(['/opt/nib/bin/nib', 'undo', '1'])
  expect(JSON.stringify(done)).toContain('put back as it was')
  await $.command.run({ command: 'nib-undo', args: 'list', origin: { kind: 'composer' } } as any)
  const pane = await $.ui.mount({ ...PANE('nib-undo'), surface: 'terminal' })
  expect((await pane.find({ type: 'Text', text: /^2:/ }))?.text).toBe('2: write 5m ago: notes.txt ')
  await pane.press({ key: 'undo-2' })
  expect(seen.runs.some(r => r.join(' ') === '/opt/nib/bin/nib undo 2')).toBe(true)
  await pane.unmount()
  const refused = await $.command.run({ command: 'nib-undo', args: 'most', origin: { kind: 'composer' } } as any)
  expect(JSON.stringify(refused)).toContain('Nothing was changed')
})

test("control bytes from programs and files never reach the person's terminal raw", async ($, on) => {
  const hostile = {
    ...STATUS,
    calls: [{ ...STATUS.calls[0], command: 'make \u001b]52;c;ZXZpbA==\u0007', tail: ['\u001b[2Jcleared \u009b31m'] }],
  }
  await started($, on, [hostile])
  const ui = await $.ui.mount({ ...PANE('nibash'), surface: 'terminal' })
  const row = await ui.find({ type: 'Text', text: /cleared/ })
  expect(row?.text).toBe('  | \\x1b[2Jcleared \\u{9b}31m')
  const head = await ui.find({ type: 'Text', text: /%1 running/ })
  expect(head?.text).toContain('make \\x1b]52;c;ZXZpbA==\\x07')
  await ui.unmount()
})

test('the band names a nibash call from its start, with its own clock, until nib has it', () => {
  const doc = (d: unknown) => parseStatus(JSON.stringify(d))
  const idle = doc({ ...STATUS, calls: [] })
  expect(bandWith(idle, [], 10_000)).toBeNull()
  expect(bandWith(null, [7_000], 10_000)).toBe('nib: running a nibash call (3s)')
  expect(bandWith(idle, [1_000, 9_500], 10_000)).toBe('nib: running 2 nibash calls (9s)')
  // A job nib knows of stays named beside the call it does not know yet.
  const job = doc({ ...STATUS, calls: [STATUS.calls[1]] })
  expect(bandWith(job, [10_000], 10_000)).toBe('nib: running a nibash call (0s); 1 job %3 npm run dev')
  // Once nib's status shows the call, nib's own words and clock are used.
  expect(bandWith(doc(STATUS), [0], 10_000)).toBe('nib: running cargo test (12s); 1 job %3 npm run dev')
})

test('a folded row of calls names each changed file with +N −M and its first changed lines', () => {
  const diff = [
    '--- a/notes.txt',
    '+++ b/notes.txt',
    '@@ -1,3 +1,3 @@',
    ' alpha',
    '-beta',
    '+delta',
    ' gamma',
    '--- a/src/lib.rs',
    '+++ b/src/lib.rs',
    '@@ -2 +2,2 @@',
    '-old();',
    '+new();',
    '+more();',
    '',
  ].join('\n')
  expect(foldedDiff([diff], 12).map(r => r.text)).toEqual([
    '  notes.txt +1 −1',
    '    -beta',
    '    +delta',
    '  src/lib.rs +2 −1',
    '    -old();',
    '    +new();',
    '    +more();',
  ])
  // Out of room: the counts stay whole, the lines stop, the rest is counted.
  expect(foldedDiff([diff], 4).map(r => r.text)).toEqual([
    '  notes.txt +1 −1',
    '    -beta',
    '    +delta',
    '  src/lib.rs +2 −1',
    '    … 3 more changed lines (ctrl+o shows all)',
  ])
  expect(foldedDiff([], 12)).toEqual([])
})
