// Bundles the extension (src/extension.ts and vscode-languageclient) into
// dist/extension.js; with --tests, the unit and protocol tests into out/test/
// (run by `node --test out/test/`, with `vscode` mocked).
import * as esbuild from 'esbuild';
import { readdirSync } from 'fs';

const production = process.argv.includes('--production');
const tests = process.argv.includes('--tests');

const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  external: ['vscode'],
  logLevel: 'warning',
};

if (tests) {
  const entryPoints = readdirSync('test')
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => `test/${f}`);
  // `vscode` is the recording stand-in (test/vscode-mock.cjs).
  await esbuild.build({
    ...common,
    external: [],
    alias: { vscode: './test/vscode-mock.cjs' },
    entryPoints,
    outdir: 'out/test',
    sourcemap: 'inline',
  });
} else {
  await esbuild.build({
    ...common,
    entryPoints: ['src/extension.ts'],
    outfile: 'dist/extension.js',
    minify: production,
    sourcemap: !production,
  });
}
