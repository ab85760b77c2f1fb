// The controls' and the cohort's figure (workflows/evaluation/figure.py) in the pinned runtime: six
// methods in one panel keep their legend inside the figure, the budget axis shows the budgets, and
// a cohort's agent equal to a control stays visible (drawn wider, under it).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-figure-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('keeps the legend inside the figure, ticks the budgets, and draws the agent visibly', () => {
  const script = `
import io, json, sys
sys.path.insert(0, ${JSON.stringify(join(ROOT, 'workflows', 'evaluation'))})
import figure
import matplotlib.pyplot as plt
methods = ["agent: pair_ridge", "design_degree1", "design_degree2", "gp_effect_variance", "gp_grid_variance", "random_degree2"]
cells = [{"track": "four", "budget": b, "method": m, "recovery": 0.1 * k + b / 20} for k, m in enumerate(methods) for b in (4, 8)]
sys.stdin = io.StringIO(json.dumps({"out": ${JSON.stringify(dir)}, "cells": cells, "name": "f"}))
figure.main()
fig = plt.gcf()
renderer = fig.canvas.get_renderer()
box, legend = fig.bbox, fig.legends[0].get_window_extent(renderer)
axis = fig.axes[0]
agent = [l for l in axis.lines if l.get_label() == "agent: pair_ridge"][0]
print(json.dumps({"inside": bool(legend.x0 >= box.x0 and legend.x1 <= box.x1 and legend.y0 >= box.y0),
  "ticks": [float(t) for t in axis.get_xticks()], "agent_width": agent.get_linewidth()}))
`;
  const out = execFileSync(join(ROOT, '.venv', 'bin', 'python'), ['-c', script], { encoding: 'utf8' });
  const result = JSON.parse(out.trim().split('\n').at(-1)!);
  expect(result).toEqual({ inside: true, ticks: [4, 8], agent_width: 4 });
}, 60_000);
