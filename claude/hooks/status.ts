// What nib's status says, read from `nibash_status` with `format: "json"`,
// and the words the mod draws from it. Pure: no `$`, so the tests call these
// directly. nib keeps the facts (calls, jobs, trash, names, seen lines,
// characters returned); this file only reads and words them.

export type Call = {
  id: number
  command: string
  description: string | null
  seconds: number
  state: 'running' | 'job' | 'ended'
  ending: string | null
  tail: string[]
}

export type Trashed = { path: string; deleted: string }
export type Name = { name: string; dir: string; source: string }
export type Usage = { agent: string; tool: string; calls: number; chars: number }
export type SeenFile = { path: string; tag: string; lines: number; seen: [number, number][] }

export type Status = {
  exe: string | null
  project: string
  sandbox: string
  calls: Call[]
  trash: Trashed[]
  names: Name[]
  usage: Usage[]
  seen: SeenFile[]
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])

/**
 * Text with every control character but newline and tab written out
 * (`\x1b`, `\u{9b}`), as nib's own CLI does for a terminal: what the
 * mod draws comes from programs and files the model controls, and a raw
 * escape would reach the person's terminal.
 */
export function visible(s: string): string {
  return s.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, c => {
    const n = c.charCodeAt(0)
    if (c === '\r') return '\\r'
    return n < 0x80 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u{${n.toString(16)}}`
  })
}

const text = (v: unknown): string => (typeof v === 'string' ? visible(v) : '')
const count = (v: unknown): number => (typeof v === 'number' ? v : 0)

/** The status document, or null when the text is not one. */
export function parseStatus(raw: string): Status | null {
  let v: unknown
  try {
    v = JSON.parse(raw)
  } catch {
    return null
  }
  if (!isRecord(v) || !Array.isArray(v.calls)) {
    return null
  }
  const calls: Call[] = list(v.calls)
    .filter(isRecord)
    .map(c => ({
      id: count(c.id),
      command: text(c.command),
      description: typeof c.description === 'string' ? c.description : null,
      seconds: count(c.seconds),
      state: c.state === 'job' || c.state === 'ended' ? c.state : 'running',
      ending: typeof c.ending === 'string' ? c.ending : null,
      tail: list(c.tail).map(text),
    }))
  return {
    exe: typeof v.exe === 'string' ? v.exe : null,
    project: text(v.project),
    sandbox: text(v.sandbox),
    calls,
    trash: list(v.trash)
      .filter(isRecord)
      .map(t => ({ path: text(t.path), deleted: text(t.deleted) })),
    names: list(v.names)
      .filter(isRecord)
      .map(n => ({ name: text(n.name), dir: text(n.dir), source: text(n.source) })),
    usage: list(v.usage)
      .filter(isRecord)
      .map(u => ({ agent: text(u.agent), tool: text(u.tool), calls: count(u.calls), chars: count(u.chars) })),
    seen: list(v.seen)
      .filter(isRecord)
      .map(f => ({
        path: text(f.path),
        tag: text(f.tag),
        lines: count(f.lines),
        seen: list(f.seen)
          .filter(Array.isArray)
          .map(r => [count(r[0]), count(r[1])] as [number, number]),
      })),
  }
}

/** Seconds as the band shows them: 42s, 3m, 2h. */
export function age(seconds: number): string {
  if (seconds >= 3600) return `${Math.floor(seconds / 3600)}h`
  if (seconds >= 60) return `${Math.floor(seconds / 60)}m`
  return `${seconds}s`
}

/** The first line of a command, cut to `width` characters. */
export function firstLine(command: string, width = 60): string {
  const line = command.split('\n')[0] ?? ''
  return line.length > width ? `${line.slice(0, width - 1)}…` : line
}

/**
 * The band above the prompt: calls the agent waits for, then jobs; null
 * when nothing runs (the band is left to others).
 */
export function bandLine(status: Status): string | null {
  const calls = status.calls.filter(c => c.state === 'running')
  const jobs = status.calls.filter(c => c.state === 'job')
  if (calls.length === 0 && jobs.length === 0) return null
  const parts: string[] = []
  if (calls.length > 0) {
    parts.push(`running ${calls.map(c => `${firstLine(c.command)} (${age(c.seconds)})`).join(', ')}`)
  }
  if (jobs.length > 0) {
    const named = jobs.map(j => `%${j.id} ${firstLine(j.command, 30)}`).join(', ')
    parts.push(`${jobs.length} job${jobs.length === 1 ? '' : 's'} ${named}`)
  }
  return `nib: ${parts.join('; ')}`
}

/**
 * The band while nib's status does not show a call yet: the nib calls
 * Claude Code has started and not seen end (their start times, ms), with
 * a clock counted here. Once nib's status names running calls, it wins.
 */
export function bandWith(status: Status | null, pending: readonly number[], now: number): string | null {
  const fromNib = status === null ? null : bandLine(status)
  const nibRuns = status?.calls.some(c => c.state === 'running') ?? false
  if (pending.length === 0 || nibRuns) return fromNib
  const seconds = Math.max(0, Math.floor((now - Math.min(...pending)) / 1000))
  const what = pending.length === 1 ? 'a nibash call' : `${pending.length} nibash calls`
  const running = `nib: running ${what} (${age(seconds)})`
  return fromNib === null ? running : `${running}; ${fromNib.slice('nib: '.length)}`
}

/** Jobs that were running at the last look and have ended since. */
export function endedSince(running: ReadonlySet<number>, status: Status): Call[] {
  return status.calls.filter(c => c.state === 'ended' && running.has(c.id))
}

/** The jobs running now, by number. */
export function runningJobs(status: Status): Set<number> {
  return new Set(status.calls.filter(c => c.state === 'job').map(c => c.id))
}

/** Lines seen, as ranges: `1-3, 7`. */
export function rangesText(ranges: readonly [number, number][]): string {
  return ranges.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(', ')
}

/** How many lines the ranges hold. */
export function rangesCount(ranges: readonly [number, number][]): number {
  return ranges.reduce((n, [a, b]) => n + (b - a + 1), 0)
}

/** Characters returned per agent and tool, biggest first, with the total. */
export function usageRows(usage: readonly Usage[]): { rows: Usage[]; total: number } {
  const rows = [...usage].sort((a, b) => b.chars - a.chars || a.tool.localeCompare(b.tool))
  return { rows, total: rows.reduce((n, u) => n + u.chars, 0) }
}

export type DiffRow = { text: string; kind: 'file' | 'hunk' | 'add' | 'del' | 'same' | 'note' }

/** A unified diff's rows, each with what it is. */
export function diffRows(diff: string): DiffRow[] {
  return visible(diff)
    .split('\n')
    .filter((line, i, all) => line !== '' || i < all.length - 1)
    .map(line => {
      if (line.startsWith('+++') || line.startsWith('---')) return { text: line, kind: 'file' }
      if (line.startsWith('@@')) return { text: line, kind: 'hunk' }
      if (line.startsWith('+')) return { text: line, kind: 'add' }
      if (line.startsWith('-')) return { text: line, kind: 'del' }
      if (line.startsWith('[')) return { text: line, kind: 'note' }
      return { text: line, kind: 'same' }
    })
}

/** nib's own tool a Claude Code tool name stands for (`edit`), or null. */
export function nibTool(name: string): string | null {
  const m = /^mcp__(?:nib|plugin_nib_nib)__(\w+)$/.exec(name)
  return m?.[1] ?? null
}

/** One change of `nib undo --list`: its number and its line. */
export type Change = { n: number; text: string }

/** The changes `nib undo --list` printed, newest first. */
export function parseChanges(listed: string): Change[] {
  return visible(listed)
    .split('\n')
    .map(line => /^(\d+): (.*)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map(m => ({ n: Number(m[1]), text: m[2] ?? '' }))
}

/** What a folded row of calls shows of their changes: per file its name
 * with `+N −M`, then the changed lines while `room` lasts, and a last row
 * saying how many more there are. The whole diff stays under ctrl+o. */
export function foldedDiff(diffs: readonly string[], room: number): DiffRow[] {
  const out: DiffRow[] = []
  let hidden = 0
  for (const diff of diffs) {
    let file: { at: number; name: string; add: number; del: number } | null = null
    const close = () => {
      if (file !== null) out[file.at] = { text: `  ${file.name} +${file.add} −${file.del}`, kind: 'file' }
    }
    for (const row of diffRows(diff)) {
      if (row.text.startsWith('+++ ')) {
        close()
        file = { at: out.length, name: row.text.slice(4).replace(/^b\//, ''), add: 0, del: 0 }
        out.push({ text: '', kind: 'file' })
        continue
      }
      if (file === null || (row.kind !== 'add' && row.kind !== 'del')) continue
      if (row.kind === 'add') file.add++
      else file.del++
      if (out.length < room) out.push({ text: `    ${row.text}`, kind: row.kind })
      else hidden++
    }
    close()
  }
  if (hidden > 0) out.push({ text: `    … ${hidden} more changed line${hidden === 1 ? '' : 's'} (ctrl+o shows all)`, kind: 'note' })
  return out
}
