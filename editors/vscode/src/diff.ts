// The file as it was before a task, from the file now and the task's
// unified diff (for VS Code's diff editor): the diff's hunks read
// backwards. Pure, tested without VS Code.

export interface FileDiff {
  /** The path after the change, as in the `+++ b/...` line. */
  path: string;
  hunks: Hunk[];
}

interface Hunk {
  newStart: number;
  lines: string[];
}

/** Splits a unified diff (several files) into per-file hunks. */
export function parseUnifiedDiff(diff: string): FileDiff[] {
  const files: FileDiff[] = [];
  let current: FileDiff | undefined;
  // Lines still due in the current hunk (old side, new side): a removed
  // line that reads `-- x` shows as `--- x`, so headers are only looked
  // for between hunks.
  let oldLeft = 0;
  let newLeft = 0;
  let hunk: Hunk | undefined;
  for (const line of diff.split('\n')) {
    if (hunk && (oldLeft > 0 || newLeft > 0)) {
      const kind = line[0];
      if (kind === '\\') {
        continue; // "\ No newline at end of file"
      }
      hunk.lines.push(line);
      if (kind !== '+') {
        oldLeft -= 1;
      }
      if (kind !== '-') {
        newLeft -= 1;
      }
      continue;
    }
    if (line.startsWith('+++ ')) {
      current = { path: line.slice(4).replace(/^b\//, '').split('\t')[0], hunks: [] };
      files.push(current);
      continue;
    }
    const header = /^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/.exec(line);
    if (header && current) {
      oldLeft = header[1] === undefined ? 1 : Number(header[1]);
      newLeft = header[3] === undefined ? 1 : Number(header[3]);
      hunk = { newStart: Number(header[2]), lines: [] };
      current.hunks.push(hunk);
    }
  }
  return files;
}

/**
 * `after` (the file now, `\n` line ends) with `file`'s hunks undone. Throws
 * when the file no longer matches the diff (it changed since the task).
 */
export function reverseApply(after: string, file: FileDiff): string {
  const lines = after.split('\n');
  const out: string[] = [];
  let next = 0; // index into `lines` not yet copied
  for (const hunk of file.hunks) {
    const start = Math.max(hunk.newStart - 1, 0);
    if (start < next) {
      throw new Error('overlapping hunks');
    }
    out.push(...lines.slice(next, start));
    let at = start;
    for (const line of hunk.lines) {
      const text = line.slice(1);
      if (line[0] === '-') {
        out.push(text);
        continue;
      }
      if (lines[at] !== text) {
        throw new Error(`${file.path} changed since the task (line ${at + 1})`);
      }
      if (line[0] === ' ') {
        out.push(text);
      }
      at += 1;
    }
    next = at;
  }
  out.push(...lines.slice(next));
  return out.join('\n');
}
