// The server's log (its stderr, one `tracing` line per event) into the
// Fettle output channel at each line's own level: vscode-languageclient
// would log every stderr line as an error.
import * as readline from 'readline';
import type { Readable } from 'stream';

export type Level = 'error' | 'warn' | 'info' | 'debug' | 'trace';

/** The parts of VS Code's LogOutputChannel used here. */
export type LogSink = Record<Level, (message: string) => void>;

// `2026-11-26T17:28:35.745180Z  WARN message`: the timestamp, the level.
const TRACING_LINE = /^\d{4}-\d\d-\d\dT\S+\s+(ERROR|WARN|INFO|DEBUG|TRACE)\s+(.*)$/;

/**
 * A server log line's level and message (VS Code adds its own timestamp).
 * A line in no known shape (a panic's, a C library's) is an error.
 */
export function parseLogLine(line: string): { level: Level; message: string } {
  const match = TRACING_LINE.exec(line);
  if (!match) {
    return { level: 'error', message: line };
  }
  return { level: match[1].toLowerCase() as Level, message: match[2] };
}

/** Forwards each line of `input` to `sink` at its level. */
export function forwardLog(input: Readable, sink: LogSink): void {
  readline
    .createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 })
    .on('line', (line) => {
      if (line.trim() === '') {
        return;
      }
      const { level, message } = parseLogLine(line);
      sink[level](message);
    });
}
