// The status bar item's text and tooltip from `fettle/stats` and what the
// extension knows (a task running, ghost text on or off). Pure.

export interface Stats {
  shown?: number;
  accepted?: number;
  acceptanceRate?: number;
  /** Each configured model used so far: its name (`model`), `ok`, `failing` or `paused`. */
  models?: { model: string; state: string; reason?: string }[];
  localModel?: { promptTokens?: number; reusedTokens?: number };
}

export interface StatusView {
  text: string;
  tooltip: string;
}

export function statusView(
  model: string,
  stats: Stats | undefined,
  working: boolean,
  ghostText: boolean,
): StatusView {
  const health = stats?.models?.find((m) => m.model === model);
  const icon = working ? '$(sync~spin)' : health && health.state !== 'ok' ? '$(warning)' : '$(sparkle)';
  const parts = [`${icon} Fettle: ${model}`];
  if (!ghostText) {
    parts.push('ghost text off');
  }
  const shown = stats?.shown ?? 0;
  if (shown > 0) {
    parts.push(`${Math.round((stats?.acceptanceRate ?? 0) * 100)}% accepted`);
  }
  const lines = [
    `Model: ${model}${health ? ` (${health.state}${health.reason ? `: ${health.reason}` : ''})` : ''}`,
    working ? 'A task is running.' : 'Idle.',
    `Ghost text: ${ghostText ? 'on' : 'off'} (click to turn it ${ghostText ? 'off' : 'on'})`,
    `Suggestions shown: ${shown}, accepted: ${stats?.accepted ?? 0}`,
  ];
  return { text: parts.join(' · '), tooltip: lines.join('\n') };
}
