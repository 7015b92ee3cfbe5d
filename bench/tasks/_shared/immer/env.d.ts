declare const process: {env: Record<string, string | undefined>}
declare const console: {log(...a: any[]): void; error(...a: any[]): void}
declare const require: any
