// Small pieces of VS Code's UI and of the protocol the extension shares.
import * as vscode from 'vscode';
import { type MessageActionItem, MessageType, type ShowMessageRequestParams } from 'vscode-languageclient/node';

import type { Range } from './commands';

/** A server question as a modal dialog; Cancel (or Escape) answers null. */
export async function askModal(params: ShowMessageRequestParams): Promise<MessageActionItem | null> {
  const titles = (params.actions ?? []).map((action) => action.title);
  const show =
    params.type === MessageType.Error
      ? vscode.window.showErrorMessage
      : params.type === MessageType.Warning
        ? vscode.window.showWarningMessage
        : vscode.window.showInformationMessage;
  const pick = await show(params.message, { modal: true }, ...titles);
  return params.actions?.find((action) => action.title === pick) ?? null;
}

export async function pickFile<T extends { path: string }>(files: T[]): Promise<T | undefined> {
  const pick = await vscode.window.showQuickPick(files.map((f) => ({ label: f.path, file: f })));
  return pick?.file;
}

/** The instruction of a rewrite preset (a code action's command arguments). */
export function instructionOf(args: unknown[] | undefined): string | undefined {
  const first = args?.[0] as { instruction?: unknown } | undefined;
  return typeof first?.instruction === 'string' ? first.instruction : undefined;
}

export function toRange(selection: vscode.Selection): Range {
  return {
    start: { line: selection.start.line, character: selection.start.character },
    end: { line: selection.end.line, character: selection.end.character },
  };
}

/** A request the user cancelled (LSP's RequestCancelled). */
export function isCancelled(error: unknown): boolean {
  return (error as { code?: number })?.code === -32800;
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
