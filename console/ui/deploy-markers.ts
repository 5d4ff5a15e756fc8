/**
 * A uPlot plugin that marks deploys on a time chart: a dashed vertical line drawn on the canvas in
 * the draw hook, and a label over the plot (an element, so it can be focused and hovered) whose
 * tip shows the version, commit and who deployed, and the deploy's verdict (did the service get
 * worse?), asked for when the tip is first opened: a chart with many markers costs nothing until
 * one is looked at. Labels close together take the next row down.
 */
import type uPlot from 'uplot';
import type { DeployMarker, DeployVerdictView } from '../api.ts';
import { formatDateTime } from './time.ts';

/** The verdict of one deploy, or undefined when it has none (the marker is gone). */
export type JudgeDeploy = (deploy: DeployMarker) => Promise<DeployVerdictView | undefined>;

const VERDICT_TEXT: Record<DeployVerdictView['verdict'], string> = {
  regression: 'Regression', improvement: 'Improvement', 'no change': 'No change', 'not enough data': 'Not enough data',
};

const LINE_COLOUR = '#b45309';
/** Room one label takes, in CSS pixels, before the next one in the same row. */
const LABEL_ROOM = 96;
const ROWS = 3;

function labelOf(deploy: DeployMarker, judge: JudgeDeploy | undefined): HTMLElement {
  const marker = document.createElement('div');
  marker.className = 'deploy-marker';
  marker.tabIndex = 0;
  marker.dataset.testid = 'deploy-marker';
  marker.dataset.service = deploy.service;
  marker.dataset.version = deploy.version;
  marker.setAttribute('aria-label', `Deploy of ${deploy.service} ${deploy.version}`);

  const label = document.createElement('span');
  label.className = 'deploy-label';
  label.textContent = deploy.version || deploy.service;
  const tip = document.createElement('div');
  tip.className = 'deploy-tip';
  tip.setAttribute('role', 'tooltip');
  const lines: Array<[string, string]> = [
    ['Deploy', `${deploy.service} ${deploy.version}`.trim()],
    ['Time', formatDateTime(deploy.time)],
    ['Commit', deploy.commit],
    ['By', deploy.deployedBy],
    ['Environment', deploy.environment],
    ['', deploy.description],
  ];
  for (const [name, value] of lines) {
    if (!value) continue;
    const line = document.createElement('div');
    if (name) {
      const key = document.createElement('span');
      key.className = 'deploy-tip-key';
      key.textContent = `${name} `;
      line.append(key);
    }
    line.append(value);
    tip.append(line);
  }
  marker.append(label, tip);
  if (judge) {
    const verdict = document.createElement('div');
    verdict.dataset.testid = 'deploy-marker-verdict';
    tip.append(verdict);
    let asked = false;
    const ask = () => {
      if (asked) return;
      asked = true;
      verdict.textContent = 'Verdict: judging…';
      judge(deploy).then(
        (judged) => { verdict.textContent = judged ? `Verdict: ${VERDICT_TEXT[judged.verdict]} — ${judged.reason}` : ''; },
        () => { verdict.textContent = 'Verdict: could not be read'; },
      );
    };
    marker.addEventListener('mouseenter', ask);
    marker.addEventListener('focus', ask);
  }
  return marker;
}

export function deployMarkersPlugin(deploys: DeployMarker[], judge?: JudgeDeploy): uPlot.Plugin {
  const sorted = [...deploys].sort((a, b) => a.time - b.time);
  let labels: HTMLElement[] | undefined;
  return {
    hooks: {
      draw: (u) => {
        // Made on the first draw, which comes before uPlot's ready hook.
        if (!labels) {
          const layer = document.createElement('div');
          layer.className = 'deploy-layer';
          labels = sorted.map((deploy) => labelOf(deploy, judge));
          layer.append(...labels);
          u.over.append(layer);
        }
        const { left, top, width, height } = u.bbox;
        const ctx = u.ctx;
        ctx.save();
        ctx.strokeStyle = LINE_COLOUR;
        ctx.lineWidth = Math.max(1, devicePixelRatio);
        ctx.setLineDash([5 * devicePixelRatio, 4 * devicePixelRatio]);
        const rowEnds = new Array<number>(ROWS).fill(-Infinity);
        sorted.forEach((deploy, i) => {
          const x = Math.round(u.valToPos(deploy.time / 1000, 'x', true));
          const inside = x >= left && x <= left + width;
          if (inside) {
            ctx.beginPath();
            ctx.moveTo(x + 0.5, top);
            ctx.lineTo(x + 0.5, top + height);
            ctx.stroke();
          }
          const label = labels![i];
          if (!label) return;
          label.hidden = !inside;
          if (!inside) return;
          const cssX = u.valToPos(deploy.time / 1000, 'x');
          let row = rowEnds.findIndex((end) => cssX - end >= LABEL_ROOM);
          if (row < 0) row = rowEnds.indexOf(Math.min(...rowEnds));
          rowEnds[row] = cssX;
          label.style.left = `${cssX}px`;
          label.style.top = `${row * 20}px`;
          // The label and its tip open towards the middle, so they stay inside the chart.
          label.classList.toggle('tip-left', cssX > width / devicePixelRatio / 2);
        });
        ctx.restore();
      },
    },
  };
}
