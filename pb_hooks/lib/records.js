// What a sender sees of a record (I2).
const literary = require("./literary.js");
const quotas = require("./quotas.js");
const respond = require("./respond.js");
const stages = require("./stages.js");

function transcriptOf(app, recordId) {
  const rows = app.findRecordsByFilter("texts", "record = {:id} && kind = 'transcript'", "", 1, 0, { id: recordId });
  return rows.length > 0 ? rows[0] : null;
}

// LA4: 0..1 once recognition is under way (it never goes back), 1 when done, null before.
function progressOf(rec) {
  const state = rec.getString("state");
  const p = rec.getFloat("progress");
  if (stages.isTerminal(state)) return 1;
  if (p > 0 || state === stages.SUBMITTED || state === stages.TRANSCRIBED) return Math.round(p * 1000) / 1000;
  return null;
}

// Activities that follow from the record alone; a step may report only the others.
const DERIVED_ONLY = ["queued", "done", "halted"];

// The closed list of activities (the schema's select values, sidecar/activity.py).
function activities(app) {
  return app.findCachedCollectionByNameOrId("audio_records").fields.getByName("activity").values;
}

// What is happening to the record now: from its stage and whether a worker
// holds it (a claim not yet expired), or the finer word the holder reported.
function activityOf(rec, now) {
  if (rec.getString("halted_at") !== "") return "halted";
  const state = rec.getString("state");
  if (stages.isTerminal(state)) return "done";
  const claimed = rec.getString("claim_token") !== "" && rec.getFloat("claim_expires_at") > now;
  if (claimed && rec.getString("activity") !== "") return rec.getString("activity");
  if (state === stages.SUBMITTED) return "waiting_for_provider";  // held or not: the provider has it
  if (!claimed) return "queued";
  if (state === stages.UPLOADED) return "normalizing";
  if (state === stages.NORMALIZED) return "recognizing";
  if (state === stages.TRANSCRIBED) return "finalizing";
  return "queued";
}

// The topic names of a recording, in its order.
function topicNames(app, rec) {
  const ids = rec.getStringSlice("topics");
  if (ids.length === 0) return [];
  const byId = {};
  for (const t of app.findRecordsByIds("topics", ids)) byId[t.id] = t.getString("name");
  return ids.filter((id) => byId[id] !== undefined).map((id) => byId[id]);
}

// The halts a sender may clear on their own (POST …/resume): those another try
// can cure, and over_quota once the day's audio quota allows it (checked at the
// resume: lib/quotas.js resumeExceeded). Not the recording's own faults
// (too_long, unsupported_media), not what the owner must look at
// (provider_rejected: the provider refused our request; unclaimable: a field
// to fix) or decided (halted_by_owner).
const SENDER_RESUMABLE = ["attempts_exhausted", "stalled", "provider_failed", "results_expired", "over_quota"];
const OVER_QUOTA = "over_quota";
// A sender resumes one recording at most this many times; then it waits for
// the owner (each resume may start a paid recognition of a lost piece).
const MAX_SENDER_RESUMES = 3;
const NOT_RESUMABLE_WHY = {
  too_long: "another try would end the same way, the recording being too long",
  unsupported_media: "another try would end the same way, the file not being readable audio",
  halted_by_owner: "the owner of the service stopped it",
};

function senderResumes(app, recordId) {
  return app.countRecords("record_events", $dbx.hashExp({ record: recordId, kind: "resumed", actor: "sender" }));
}

// Why the sender may not resume `rec` ({code, message}), or null when they may.
function resumeRefusal(app, rec) {
  if (rec.getString("halted_at") === "") {
    return { code: "not_halted", message: "This recording is not halted: there is nothing to resume." };
  }
  const code = rec.getString("halt_code");
  if (SENDER_RESUMABLE.indexOf(code) < 0) {
    return { code: "not_resumable", message: "A recording halted '" + code + "' cannot be resumed by its sender: " +
      (NOT_RESUMABLE_WHY[code] || "the owner of the service has to look at it") + "." };
  }
  if (senderResumes(app, rec.id) >= MAX_SENDER_RESUMES) {
    return { code: "resume_limit", message: "This recording was resumed " + MAX_SENDER_RESUMES + " times already; " +
      "the owner of the service decides what happens to it now." };
  }
  return null;
}

// A recording halted over_quota: whether the day's audio quota lets its sender
// resume it now, and if not, when it will (ms; null: never under this quota).
function quotaResume(app, rec, now) {
  const over = quotas.resumeExceeded(app, rec, now);
  if (!over) return { now: true, at: null };
  return { now: false, at: over.never ? null : now + over.retryAfter * 1000 };
}

// The files the sender's page plays: the original and the playable copy (a
// copy normalize made of an original a browser cannot play), or null for each.
function audioFiles(app, recordId) {
  const rows = app.findRecordsByFilter("files", "record = {:id} && (role = 'original' || role = 'playable')",
    "created,id", 0, 0, { id: recordId });
  return {
    original: rows.find((r) => r.getString("role") === "original") || null,
    copy: rows.find((r) => r.getString("role") === "playable" && r.getString("blob") !== "") || null,
  };
}

// Halts after which normalize will not run again without the owner: no copy comes.
const NO_COPY_COMING = ["too_long", "unsupported_media"];

// What GET …/audio plays (the poll's `playback`): `original` (a browser plays
// it as uploaded; or it was stored before that was known, and is served as
// before), `copy` (the playable copy), `pending` (a browser cannot play the
// original and normalize has yet to make the copy), `none` (a browser cannot
// play the original and no copy is coming: normalized before copies were
// made, or halted where normalize will not run again). Decided from intake's
// verdict on the original (files.browser_plays), never by trying.
function playbackOf(rec, files) {
  const plays = files.original ? files.original.getString("browser_plays") : "";
  if (plays === "yes") return "original";
  if (files.copy) return "copy";
  if (plays === "") return "original";
  const halt = rec.getString("halted_at") !== "" ? rec.getString("halt_code") : "";
  return rec.getString("state") === stages.UPLOADED && NO_COPY_COMING.indexOf(halt) < 0 ? "pending" : "none";
}

// Why a finished recording has no brief, as a code, or null (a brief, insights off, or the step still to
// run): the step's own `no_brief` (no_speech, nothing_usable), or insights_halted (its row halted: the
// owner sees why). Read from the insights row (lib/insights.js writes it).
function briefMissingReason(app, rec) {
  if (rec.getString("brief") !== "" || !stages.isTerminal(rec.getString("state"))) return null;
  const rows = app.findRecordsByFilter("insights", "record = {:id}", "", 1, 0, { id: rec.id });
  if (rows.length === 0) return null;
  const code = rows[0].getString("no_brief");
  if (code !== "") return code;
  return rows[0].getString("halted_at") !== "" ? "insights_halted" : null;
}

// I2 (and, without `text`, each item of the list, O12). `brief` and `topics`
// (names) once the insights step (or the owner) wrote them: null and [] before.
function pollBody(app, rec, withText) {
  const done = stages.isTerminal(rec.getString("state"));
  const halted = rec.getString("halted_at") !== "";
  let text = null;
  if (done && withText !== false) {
    const t = transcriptOf(app, rec.id);
    text = t ? t.getString("content") : "";
  }
  const now = Date.now();
  let resumable = halted && resumeRefusal(app, rec) === null;
  let resumableAt = null;
  if (resumable && rec.getString("halt_code") === OVER_QUOTA) {
    const quota = quotaResume(app, rec, now);
    resumable = quota.now;
    resumableAt = quota.at === null ? null : new Date(quota.at).toISOString();
  }
  const body = {
    id: rec.id,
    status: rec.getString("state"),
    activity: activityOf(rec, now),
    halted: halted,
    halted_at: respond.iso(rec.getString("halted_at")),
    halt_code: halted && rec.getString("halt_code") !== "" ? rec.getString("halt_code") : null,
    title: rec.getString("title"),
    language: rec.getString("language") || null,
    created: respond.iso(rec.getString("created")),
    updated: respond.iso(rec.getString("updated")),
    progress: progressOf(rec),
    brief: rec.getString("brief") || null,
    // Why there is no brief and none is coming (the sender's page says so): null while one may still come.
    brief_missing_reason: briefMissingReason(app, rec),
    topics: topicNames(app, rec),
    // Whether the sender may resume it now (POST /api/transcriber/records/{id}/resume).
    resumable: resumable,
    // Halted over_quota: when the daily audio quota lets the sender resume it (null: now, or never).
    resumable_at: resumableAt,
    // What the sender's page can play (GET …/audio): original, copy, pending or none.
    playback: playbackOf(rec, audioFiles(app, rec.id)),
    // The literary text (GET …/text): ready, pending (being made, or made again after a
    // correction), or null (none is made for this recording).
    literary: literary.status(app, rec.id),
    text: text,
  };
  if (withText === false) delete body.text;
  return body;
}

// The sender's own record, or null: someone else's record and a missing id
// look the same from outside (404 either way).
function findOwned(app, id, userId) {
  try {
    const rec = app.findRecordById("audio_records", id);
    return rec.getString("owner") === userId ? rec : null;
  } catch (_) {
    return null;
  }
}

// The closed list of language codes (the schema's select values, SPEC L3).
function languages(app) {
  return app.findCachedCollectionByNameOrId("audio_records").fields.getByName("language").values;
}

// A recording's files and recognition attempts (the rows, oldest first; never a
// blob or a raw response: ST7), as its pipeline step reads them.
function rowsOf(app, id) {
  return {
    files: app.findRecordsByFilter("files", "record = {:id}", "created,id", 0, 0, { id: id }),
    attempts: app.findRecordsByFilter("recognition_attempts", "record = {:id}", "created,id", 0, 0, { id: id }),
  };
}

module.exports = {
  rowsOf: rowsOf, pollBody: pollBody, findOwned: findOwned, transcriptOf: transcriptOf, languages: languages,
  activities: activities, DERIVED_ONLY: DERIVED_ONLY, topicNames: topicNames, SENDER_RESUMABLE: SENDER_RESUMABLE,
  resumeRefusal: resumeRefusal, OVER_QUOTA: OVER_QUOTA, audioFiles: audioFiles, playbackOf: playbackOf,
};
