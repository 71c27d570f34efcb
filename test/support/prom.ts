// Reads a Prometheus text exposition as `name{labels}` → value (labels as the registry wrote them).
export function samples(text: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const line of text.split('\n')) {
    const s = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (s?.[1] && s[2]) m.set(s[1], Number(s[2]));
  }
  return m;
}
