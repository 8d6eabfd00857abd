/// <reference path="../pb_data/types.d.ts" />
// Usage, per sender and per day, for the owner (superusers only: no rule opens
// them): two read-only views over what the pipeline already records.
//
// - usage_daily: recordings uploaded that day and their audio hours (a
//   recording's length is the end of its last normalized piece; a recording
//   not yet normalized, or found silent, counts 0 hours).
// - usage_providers: recognition calls a provider accepted that day (an
//   attempt with an operation id: one per piece) and the seconds of audio
//   they carried (the piece each attempt recognized), by provider.
//
// Days are UTC, from `created` (the upload for recordings, the call for
// attempts).
const DAILY = `
SELECT (r.owner || '/' || substr(r.created, 1, 10)) AS id,
       r.owner AS sender,
       CAST(substr(r.created, 1, 10) AS TEXT) AS day,
       COUNT(*) AS recordings,
       CAST(ROUND(COALESCE(SUM(len.ms), 0) / 3600000.0, 4) AS REAL) AS audio_hours
FROM audio_records r
LEFT JOIN (
  SELECT record, MAX(offset_ms + duration_ms) AS ms
  FROM files WHERE role = 'normalized' AND superseded = FALSE GROUP BY record
) len ON len.record = r.id
GROUP BY r.owner, substr(r.created, 1, 10)`;

const PROVIDERS = `
SELECT (r.owner || '/' || substr(a.created, 1, 10) || '/' || a.provider) AS id,
       r.owner AS sender,
       CAST(substr(a.created, 1, 10) AS TEXT) AS day,
       a.provider AS provider,
       COUNT(*) AS calls,
       CAST(ROUND(COALESCE(SUM((
         SELECT f.duration_ms FROM files f
         WHERE f.record = a.record AND f.role = 'normalized' AND f.piece = a.piece AND f.created <= a.created
         ORDER BY f.created DESC LIMIT 1
       )), 0) / 1000.0, 1) AS REAL) AS provider_seconds
FROM recognition_attempts a
JOIN audio_records r ON r.id = a.record
WHERE a.operation_id != ''
GROUP BY r.owner, substr(a.created, 1, 10), a.provider`;

migrate((app) => {
  for (const [name, query] of [["usage_daily", DAILY], ["usage_providers", PROVIDERS]]) {
    const view = new Collection({ type: "view", name: name, viewQuery: query });
    app.save(view);
  }
}, (app) => {
  for (const name of ["usage_providers", "usage_daily"]) {
    app.delete(app.findCollectionByNameOrId(name));
  }
});
