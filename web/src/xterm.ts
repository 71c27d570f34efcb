// xterm.js and its stylesheet, loaded only when a terminal is opened (its own chunk), so the
// rest of the console stays small and renders first.
import '@xterm/xterm/css/xterm.css';

export { Terminal } from '@xterm/xterm';

/**
 * Columns and rows of `term` that fit `box`. Measures one character cell in the terminal's
 * font (what @xterm/addon-fit does with xterm internals), so no extra dependency is needed.
 */
export function fitSize(
  box: HTMLElement,
  font: { family: string; size: number; lineHeight?: number },
): { cols: number; rows: number } {
  const probe = document.createElement('span');
  probe.textContent = 'W'.repeat(32);
  probe.style.cssText = `position:absolute;visibility:hidden;white-space:pre;line-height:normal;font-family:${font.family};font-size:${font.size}px`;
  document.body.appendChild(probe);
  const r = probe.getBoundingClientRect();
  probe.remove();
  const cellW = r.width / 32 || 8;
  // xterm's row height: the font's cell times lineHeight, whole pixels.
  const cellH = Math.floor((Math.ceil(r.height) || 16) * (font.lineHeight ?? 1));
  const style = getComputedStyle(box);
  const w = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 14; // scrollbar
  const h = box.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
  return { cols: Math.max(20, Math.floor(w / cellW)), rows: Math.max(5, Math.floor(h / cellH)) };
}
