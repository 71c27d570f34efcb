// SQL text shared by the PostgreSQL mesh statements.

/** ISO 8601 UTC text with milliseconds, exactly as lib/clock.ts iso() writes it. */
export const isoSql = (msExpr: string) =>
  `to_char((timestamptz 'epoch' + (${msExpr}) * interval '1 millisecond') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
