// A task's change in VS Code's diff editor: the file as it was before the
// task (rebuilt from the file now and the task's diff, served under its
// own scheme) against the file now.
import * as vscode from 'vscode';

import type { TaskResult } from './commands';
import { parseUnifiedDiff, reverseApply } from './diff';
import { errorMessage, pickFile } from './ui';

const BEFORE_SCHEME = 'fettle-before';

export class DiffView {
  private readonly before = new Map<string, string>();
  private readonly beforeChanged = new vscode.EventEmitter<vscode.Uri>();

  constructor(subscriptions: { dispose(): unknown }[]) {
    subscriptions.push(
      this.beforeChanged,
      vscode.workspace.registerTextDocumentContentProvider(BEFORE_SCHEME, {
        onDidChange: this.beforeChanged.event,
        provideTextDocumentContent: (uri) => this.before.get(uri.toString()) ?? '',
      }),
    );
  }

  /** Shows TASK's change (a file of it, picked when it changed several). */
  async show(task: TaskResult | undefined): Promise<void> {
    if (!task?.diff) {
      void vscode.window.showInformationMessage('Fettle: no task with changes yet.');
      return;
    }
    const files = parseUnifiedDiff(task.diff);
    const file = files.length === 1 ? files[0] : await pickFile(files);
    if (!file) {
      return;
    }
    const root = vscode.workspace.workspaceFolders?.[0]?.uri;
    if (!root) {
      return;
    }
    const after = vscode.Uri.joinPath(root, file.path);
    try {
      const now = (await vscode.workspace.openTextDocument(after)).getText().replace(/\r\n/g, '\n');
      const before = vscode.Uri.from({ scheme: BEFORE_SCHEME, path: after.path, query: task.taskId });
      this.before.set(before.toString(), reverseApply(now, file));
      this.beforeChanged.fire(before);
      await vscode.commands.executeCommand('vscode.diff', before, after, `${file.path} (Fettle task ${task.taskId})`);
    } catch (error) {
      void vscode.window.showWarningMessage(`Fettle: cannot show the diff: ${errorMessage(error)}`);
    }
  }
}
