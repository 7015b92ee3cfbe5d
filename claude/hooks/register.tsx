// The nib mod: what nib's tools do, shown to the person in Claude Code.
//
// - The band above the prompt names running nibash calls and jobs.
// - A toast says when a job ends.
// - Panes: /nibash (calls and jobs with their last lines; stop a job),
//   /trash (restore an entry), /tokens (characters returned per agent and
//   tool), /names, /seen (the lines the agent has seen, per file).
// - The row of each nib edit and write shows its diff; the agent's context
//   does not grow by it. Where Claude Code folds a turn's calls into one
//   line, the line is followed by each changed file with +N −M and the
//   first changed lines.
// - /nib-undo puts back nib's last change (or one from its list).
//
// Everything comes from nib itself: its `nibash_status` tool (format json,
// read-only) over MCP, `nibash_control` for Stop and Restore, and its
// command line (`nib undo`) for what only the person may do. This module
// words and draws; status.ts reads.

import type { EngineInterface, Register } from 'claude-code'

type Dollar = EngineInterface

import {
  bandWith,
  diffRows,
  endedSince,
  foldedDiff,
  nibTool,
  parseChanges,
  parseStatus,
  rangesCount,
  rangesText,
  runningJobs,
  usageRows,
  visible,
  age,
  firstLine,
  type Change,
  type Status,
} from './status'

/** The panes, by command. */
export const PANES = {
  nibash: 'nib calls and jobs',
  trash: 'nib trash',
  tokens: 'nib characters returned',
  names: 'nib names',
  seen: 'nib seen lines',
  'nib-undo': 'nib changes',
} as const

type PaneId = keyof typeof PANES

/** Where nib's server answers: as `nib setup` names it, or as this plugin does. */
const SERVERS = ['nib', 'plugin:nib:nib'] as const

/** How often the status is read while something runs (ms): the band's
 * clock moves by the second. Nothing is read while nothing runs. */
const EVERY_MS = 1000

/** Diffs kept for tool rows. */
const DIFFS_KEPT = 50

/** Rows a folded group of calls may add for the changes its edits made. */
const FOLDED_ROOM = 12

/** What the mod knows, per loaded copy. */
type Mod = {
  status: Status | null
  server: string | null
  running: Set<number>
  changes: Change[]
  note: string
  diffs: Map<string, string>
  /** nibash calls started and not yet answered: when each started (ms). */
  pending: Map<string, number>
}

/** nib's tools the mod calls: the status reads, the control stops a job or
 * restores a trashed path. */
type NibTool = 'nibash_status' | 'nibash_control'

/** Calls one of nib's tools by whichever name its server has here. */
async function callNib($: Dollar, mod: Mod, tool: NibTool, args: Record<string, unknown>): Promise<string | null> {
  const order = mod.server === null ? [...SERVERS] : [mod.server, ...SERVERS.filter(s => s !== mod.server)]
  for (const name of order) {
    try {
      const answer = await $.mcp.call(name, tool, args)
      mod.server = name
      return answer.content
        .map(block => ('text' in block && typeof block.text === 'string' ? block.text : ''))
        .join('')
    } catch {
      // Not this server's name here: the next one.
    }
  }
  return null
}

/** Reads the status again; toasts jobs that ended; redraws. */
async function refresh($: Dollar, mod: Mod, args: Record<string, unknown> = {}): Promise<void> {
  const text = await callNib($, mod, 'nibash_status', { format: 'json', tail: 8, ...args })
  const next = text === null ? null : parseStatus(text)
  if (next === null) return
  for (const job of endedSince(mod.running, next)) {
    $.ui.toast(`nib: job %${job.id} ${job.ending ?? 'ended'}: ${firstLine(job.command, 40)}`)
  }
  mod.running = runningJobs(next)
  mod.status = next
  $.ui.invalidate('ui.render')
}

/** Stops a job or restores a path through `nibash_control`, keeps what nib
 * said as the pane's note, and reads the status again. */
async function control($: Dollar, mod: Mod, args: { stop: string } | { restore: string }): Promise<void> {
  const said = await callNib($, mod, 'nibash_control', args)
  mod.note = said === null ? 'nib did not answer; nothing was changed.' : visible(said)
  await refresh($, mod)
}

/** Runs one of nib's command-line verbs in the project. */
async function runNib($: Dollar, mod: Mod, argv: string[]): Promise<{ text: string; ok: boolean }> {
  if (mod.status === null) await refresh($, mod)
  const exe = mod.status?.exe ?? 'nib'
  const project = mod.status?.project ?? ''
  try {
    const ran = await $.process.run([exe, ...argv], project === '' ? undefined : { cwd: project })
    return { text: ran.stdout + ran.stderr, ok: ran.exitCode === 0 }
  } catch (error) {
    return { text: `nib ${argv.join(' ')} did not run: ${String(error)}`, ok: false }
  }
}

/** Reads `nib undo --list`. */
async function loadChanges($: Dollar, mod: Mod): Promise<void> {
  const listed = await runNib($, mod, ['undo', '--list'])
  mod.changes = parseChanges(listed.text)
}

/** Puts change `n` back and says what happened. */
async function undo($: Dollar, mod: Mod, n: number): Promise<string> {
  const done = await runNib($, mod, ['undo', String(n)])
  await loadChanges($, mod)
  $.ui.invalidate('ui.render')
  return done.text.trim() || `nib undo ${n}: done`
}

export const register: Register = on => {
  const mod: Mod = {
    status: null,
    server: null,
    running: new Set(),
    changes: [],
    note: '',
    diffs: new Map(),
    pending: new Map(),
  }

  on('session.start', async ($, e, next) => {
    const started = await next(e)
    for (const [name, title] of Object.entries(PANES)) {
      await $.command.register({
        name,
        description: name === 'nib-undo' ? "Put back nib's last change (or N; `list` shows them)" : `Open the ${title} pane`,
      })
    }
    $.clock.every(EVERY_MS, () => {
      if (
        mod.pending.size > 0 ||
        mod.running.size > 0 ||
        (mod.status?.calls.some(c => c.state === 'running') ?? false)
      ) {
        void refresh($, mod)
        $.ui.invalidate('ui.render')
      }
    })
    return started
  })

  on('tool.call', async ($, e, next) => {
    const tool = nibTool(e.tool)
    if (tool === null) return next(e)
    // The band names a nibash call from its start, before nib's status
    // (read on the clock) has it.
    const key = String(e.tool_use_id ?? `call-${Date.now()}-${mod.pending.size}`)
    if (tool === 'nibash') {
      mod.pending.set(key, Date.now())
      $.ui.invalidate('ui.render')
    }
    let ran
    try {
      ran = await next(e)
    } finally {
      mod.pending.delete(key)
    }
    if ((tool === 'edit' || tool === 'write') && ran.isError !== true && ran.deny === undefined) {
      const shown = await runNib($, mod, ['undo', '--diff'])
      if (shown.ok && shown.text.trim() !== '') {
        mod.diffs.set(e.tool_use_id, shown.text)
        while (mod.diffs.size > DIFFS_KEPT) {
          const oldest = mod.diffs.keys().next().value
          if (oldest === undefined) break
          mod.diffs.delete(oldest)
        }
      }
    }
    await refresh($, mod)
    return ran
  }).catch(($, e, next) => next(e))

  on('command.run', { command: 'nib-undo' }, async ($, e) => {
    const arg = e.args.trim()
    if (arg === 'list') {
      await loadChanges($, mod)
      await $.ui.open({ id: 'nib-undo', title: PANES['nib-undo'] })
      return { text: 'nib changes pane opened.' }
    }
    const n = arg === '' ? 1 : Number(arg)
    if (!Number.isInteger(n) || n < 1) {
      return { text: `/nib-undo takes a change's number or list; got "${arg}". Nothing was changed.` }
    }
    return { text: await undo($, mod, n) }
  }).catch(() => ({ text: '/nib-undo failed before nib answered; nothing was changed. `nib undo --list` in a shell shows the changes.' }))

  for (const id of Object.keys(PANES) as PaneId[]) {
    if (id === 'nib-undo') continue
    on('command.run', { command: id }, async $ => {
      await refresh($, mod)
      await $.ui.open({ id, title: PANES[id] })
      return { text: `${PANES[id]} pane opened.` }
    }).catch(() => ({ text: `/${id}: nib did not answer; is its MCP server connected (/mcp)?` }))
  }

  on('ui.render', { component: 'AbovePrompt' }, async ($, e, next) => {
    const line = bandWith(mod.status, [...mod.pending.values()], Date.now())
    if (line === null) return next(e)
    const { Box, Text } = $.ui.resolve(e)
    return (
      <Box>
        <Text key="band" dimColor>
          {line}
        </Text>
      </Box>
    )
  })

  on('ui.render', { component: 'ToolGroup' }, async ($, e, next) => {
    const drawn = await next(e)
    // Unfolded (ctrl+o, --verbose), each row draws its own diff.
    if (e.props.isExpanded) return drawn
    const diffs = e.props.calls.flatMap(call => {
      const diff = call.tool_use_id === undefined ? undefined : mod.diffs.get(call.tool_use_id)
      return diff !== undefined && nibTool(call.tool) !== null ? [diff] : []
    })
    if (diffs.length === 0) return drawn
    const { Box, Text } = $.ui.resolve(e)
    const color = { add: 'green', del: 'red', hunk: 'cyan', file: undefined, same: undefined, note: undefined } as const
    return (
      <Box flexDirection="column">
        {drawn}
        {foldedDiff(diffs, FOLDED_ROOM).map(row => (
          <Text color={color[row.kind]} dimColor={row.kind === 'note'}>
            {row.text}
          </Text>
        ))}
      </Box>
    )
  })

  on('ui.render', { component: 'ToolResult' }, async ($, e, next) => {
    const diff = mod.diffs.get(e.props.tool_use_id)
    if (diff === undefined || nibTool(e.props.tool) === null) return next(e)
    const drawn = await next(e)
    const { Box, Text } = $.ui.resolve(e)
    const color = { add: 'green', del: 'red', hunk: 'cyan', file: undefined, same: undefined, note: undefined } as const
    return (
      <Box flexDirection="column">
        {drawn}
        {diffRows(diff).map(row => (
          <Text color={color[row.kind]} dimColor={row.kind === 'file' || row.kind === 'note'}>
            {row.text}
          </Text>
        ))}
      </Box>
    )
  })

  on('ui.render', { component: 'Pane', requestId: 'nibash' }, async ($, e) => {
    const { Box, Button, Text } = $.ui.resolve(e)
    const calls = mod.status?.calls ?? []
    return (
      <Box flexDirection="column">
        {mod.note !== '' && <Text dimColor>{mod.note.trim()}</Text>}
        {calls.length === 0 && <Text dimColor>No nibash calls or jobs.</Text>}
        {calls.map(c => (
          <Box flexDirection="column">
            <Text bold>
              %{c.id} {c.state === 'ended' ? (c.ending ?? 'ended') : c.state} {age(c.seconds)}: {firstLine(c.command)}
            </Text>
            {c.tail.map(line => (
              <Text dimColor>  | {line}</Text>
            ))}
            {c.state === 'job' && (
              <Button key={`stop-${c.id}`} label={`Stop %${c.id}`} onPress={() => control($, mod, { stop: `%${c.id}` })} />
            )}
          </Box>
        ))}
      </Box>
    )
  })

  on('ui.render', { component: 'Pane', requestId: 'trash' }, async ($, e) => {
    const { Box, Button, Text } = $.ui.resolve(e)
    const trash = mod.status?.trash ?? []
    return (
      <Box flexDirection="column">
        {mod.note !== '' && <Text dimColor>{mod.note.trim()}</Text>}
        {trash.length === 0 && <Text dimColor>The trash is empty.</Text>}
        {trash.map(t => (
          <Box>
            <Text>
              {t.path} <Text dimColor>{t.deleted}</Text>{' '}
            </Text>
            <Button key={`restore-${t.path}`} label="Restore" onPress={() => control($, mod, { restore: t.path })} />
          </Box>
        ))}
      </Box>
    )
  })

  on('ui.render', { component: 'Pane', requestId: 'tokens' }, async ($, e) => {
    const { Box, Text } = $.ui.resolve(e)
    const { rows, total } = usageRows(mod.status?.usage ?? [])
    return (
      <Box flexDirection="column">
        <Text bold>characters returned this session: {total}</Text>
        {rows.map(u => (
          <Text>
            {u.agent} {u.tool}: {u.chars} in {u.calls} call{u.calls === 1 ? '' : 's'}
          </Text>
        ))}
      </Box>
    )
  })

  on('ui.render', { component: 'Pane', requestId: 'names' }, async ($, e) => {
    const { Box, Text } = $.ui.resolve(e)
    const names = mod.status?.names ?? []
    return (
      <Box flexDirection="column">
        {names.length === 0 && <Text dimColor>No names are defined.</Text>}
        {names.map(n => (
          <Text>
            ~{n.name} = {n.dir} <Text dimColor>({n.source})</Text>
          </Text>
        ))}
      </Box>
    )
  })

  on('ui.render', { component: 'Pane', requestId: 'seen' }, async ($, e) => {
    const { Box, Text } = $.ui.resolve(e)
    const seen = mod.status?.seen ?? []
    return (
      <Box flexDirection="column">
        {seen.length === 0 && <Text dimColor>The agent has seen no file yet.</Text>}
        {seen.map(f => (
          <Text>
            {f.path}#{f.tag}: {rangesCount(f.seen)} of {f.lines} lines ({rangesText(f.seen)})
          </Text>
        ))}
      </Box>
    )
  })

  on('ui.render', { component: 'Pane', requestId: 'nib-undo' }, async ($, e) => {
    const { Box, Button, Text } = $.ui.resolve(e)
    return (
      <Box flexDirection="column">
        {mod.changes.length === 0 && <Text dimColor>No change of nib's to undo.</Text>}
        {mod.changes.map(c => (
          <Box>
            <Text>
              {c.n}: {c.text}{' '}
            </Text>
            <Button key={`undo-${c.n}`} label="Undo" onPress={() => undo($, mod, c.n).then(text => $.ui.toast(text))} />
          </Box>
        ))}
      </Box>
    )
  })
}
