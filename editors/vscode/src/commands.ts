// The arguments of the server's commands, built from what the user picked.
// Pure: the extension's glue passes editor state in.

export interface Range {
  start: { line: number; character: number };
  end: { line: number; character: number };
}

/** `fettle.rewrite` for a selection and a typed instruction. */
export function rewriteArguments(uri: string, range: Range, version: number, instruction: string): unknown[] {
  return [{ uri, range, version, instruction }];
}

/** `fettle.chat`: the message, with the file and the selection (if any) as context. */
export function chatArguments(
  message: string,
  uri: string | undefined,
  range: Range | undefined,
  continued = false,
): unknown[] {
  const arg: Record<string, unknown> = { message };
  if (continued) {
    arg.continue = true;
  }
  if (uri !== undefined) {
    arg.uri = uri;
  }
  if (range !== undefined && !isEmpty(range)) {
    arg.range = range;
  }
  return [arg];
}

/** `fettle.fixDiagnostics` for one file (or, without a file, the workspace). */
export function fixArguments(uri: string | undefined): unknown[] {
  return [uri === undefined ? {} : { uri }];
}

/** `fettle.undo` / `fettle.cancel` for a task (the latest when none is given). */
export function taskArguments(taskId: string | undefined): unknown[] {
  return [taskId === undefined ? {} : { taskId }];
}

export function isEmpty(range: Range): boolean {
  return range.start.line === range.end.line && range.start.character === range.end.character;
}

export interface TaskResult {
  taskId: string;
  status: string;
  summary: string;
  changedFiles?: string[];
  diff?: string;
  /** A chat's conversation so far (`continue`). */
  conversation?: { turns: number };
}

/** A chat message: `/new …` starts a new conversation. */
export function chatMessage(typed: string): { message: string; fresh: boolean } {
  const match = /^\s*\/new\b\s*/.exec(typed);
  return match ? { message: typed.slice(match[0].length), fresh: true } : { message: typed, fresh: false };
}

/** One line for a notification about a finished task. */
export function taskMessage(result: TaskResult): string {
  const files = result.changedFiles?.length ?? 0;
  const changed = files === 0 ? 'no file changed' : `${files} file${files === 1 ? '' : 's'} changed`;
  const summary = result.summary.split('\n')[0];
  return `Fettle: ${result.status.replace('_', ' ')} — ${summary} (${changed})`;
}
