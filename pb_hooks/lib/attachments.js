// What a step stores of a recording under its claim (lib/pipeline.js ROUTES): its files, its
// recognition attempts, its texts and its measured length; what the sweep tends with no
// claim (a done record has none): the attempts' provider-side copies and the normalized
// audio of recordings done long ago; and the workers' file downloads.
const args = require("./args.js");
const journal = require("./journal.js");
const quotas = require("./quotas.js");
const records = require("./records.js");
const respond = require("./respond.js");
const routes = require("./routes.js");
const settle = require("./settle.js");
const stages = require("./stages.js");

// The row `id` of `collection` (inside the caller's transaction), or Invalid naming `what`.
function found(tx, collection, id, what) {
  try {
    return tx.findRecordById(collection, id);
  } catch (_) {
    throw new args.Invalid("no such " + what);
  }
}

// A new row of `collection` for the recording `recordId`, filled by `fill(row)` and saved;
// or, when this write is a repeat of one that landed (O4: the same `write_key`), the row
// that one made.
function keyed(tx, collection, recordId, body, fill) {
  const key = args.optText(body, "write_key", 100) || "";
  const earlier = settle.writtenBefore(tx, collection, recordId, key);
  if (earlier) return earlier;
  const r = new Record(tx.findCollectionByNameOrId(collection));
  r.set("record", recordId);
  r.set("write_key", key);
  fill(r);
  tx.save(r);
  return r;
}

// The uploaded files of the form field `field`: none when the request is no form.
function uploaded(e, field) {
  const multipart = String(e.request.header.get("Content-Type") || "").indexOf("multipart/form-data") === 0;
  return multipart ? e.findUploadedFiles(field) || [] : [];
}

// A file of the record, attached under the fence: a piece of normalized audio (role
// `normalized`), or the copy a browser plays of an original it cannot (role `playable`);
// never an original, which only intake stores. A piece without speech (a silent
// recording) is a row without a blob: nothing in it is ever sent anywhere, so nothing of
// it is kept but its place and length.
function attachFile(e) {
  return routes.fenced(e, "audio_records", (body) => {
    const role = args.text(body, "role", 50);
    if (["normalized", "playable"].indexOf(role) < 0) throw new args.Invalid("'role' must be normalized or playable");
    const blobs = uploaded(e, "blob");
    const silent = body.speech_ms !== undefined && body.speech_ms !== "" && args.count(body, "speech_ms") === 0;
    if (blobs.length > 1 || (blobs.length === 0 && (!silent || role === "playable"))) {
      throw new args.Invalid("exactly one 'blob' file is required (none only for a piece without speech)");
    }
    return { role: role, blob: blobs.length ? blobs[0] : null };
  }, (tx, rec, a, body) => keyed(tx, "files", rec.id, body, (r) => {
    r.set("role", a.role);
    r.set("format", args.optText(body, "format", 50) || "");
    r.set("name", a.blob ? a.blob.originalName : "");
    r.set("size", a.blob ? a.blob.size : 0);
    for (const f of ["duration_ms", "piece", "pieces", "offset_ms", "speech_ms"]) r.set(f, args.optCount(body, f));
    r.set("location", args.optText(body, "location", 2000) || "");
    // Where the speech is in the piece ([start, end] pairs in ms), found once at normalize.
    const speech = typeof body.speech === "string" && body.speech !== "" ? JSON.parse(body.speech) : body.speech;
    if (Array.isArray(speech)) r.set("speech", speech);
    if (a.blob) r.set("blob", a.blob);
  }));
}

// H4: normalize measured the recording's decoded length (`duration_ms`). It is charged to
// the sender's day in place of intake's reservation, in the fenced transaction; when it
// breaks the quota nothing is charged and the answer says why (the step halts the record
// over_quota, before any recognition).
function chargeAudio(e) {
  return routes.fenced(e, "audio_records", (body) => args.count(body, "duration_ms"), (tx, rec, duration) => {
    // The recording's length, kept once: everything after normalize reads it from here.
    tx.db().newQuery("UPDATE audio_records SET duration_ms = {:ms} WHERE id = {:id}").bind({ id: rec.id, ms: duration }).execute();
    const over = quotas.measured(tx, rec, duration, Date.now());
    return over ? { fits: false, reason: over } : { fits: true };
  });
}

// P18: the attempt row exists before the provider is called.
function addAttempt(e) {
  return routes.fenced(e, "audio_records", null, (tx, rec, _, body) => keyed(tx, "recognition_attempts", rec.id, body, (r) => {
    r.set("provider", args.text(body, "provider", 50));
    r.set("model", args.optText(body, "model", 200) || "");
    r.set("status", args.optText(body, "status", 50) || "started");
    r.set("audio_uri", args.optText(body, "audio_uri", 2000) || "");
    r.set("piece", args.optCount(body, "piece"));
    r.set("offset_ms", args.optCount(body, "offset_ms"));
  }));
}

// Updates an attempt: operation id, audio location, status, raw response, and that its
// provider-side copies are gone (`copies_removed_at`). Answers the row.
function updateAttempt(e) {
  const aid = e.request.pathValue("aid");
  return routes.fenced(e, "audio_records", () => uploaded(e, "raw_response"), (tx, rec, raw, body) => {
    const r = found(tx, "recognition_attempts", aid, "attempt");
    if (r.getString("record") !== rec.id) throw new args.Invalid("the attempt belongs to another record");
    for (const f of ["operation_id", "audio_uri", "status", "model"]) {
      const v = args.optText(body, f, 2000);
      if (v !== null) r.set(f, v);
    }
    if (body.copies_removed_at !== undefined) {
      r.set("copies_removed_at", args.count(body, "copies_removed_at"));
      r.set("copies_error", "");
    }
    if (raw.length === 1) r.set("raw_response", raw[0]);
    tx.save(r);
    return r;
  });
}

// The record's text of one kind, created or replaced (one row per kind).
function putText(e) {
  const kind = e.request.pathValue("kind");
  return routes.fenced(e, "audio_records", null, (tx, rec, _, body) => {
    // The transcript's language lands with it (L3); a code outside the schema's list is not kept.
    const language = args.optText(body, "language", 10);
    if (language !== null && records.languages(tx).indexOf(language) >= 0) {
      tx.db().newQuery("UPDATE audio_records SET language = {:language} WHERE id = {:id}").bind({ id: rec.id, language: language }).execute();
    }
    const rows = tx.findRecordsByFilter("texts", "record = {:id} && kind = {:kind}", "", 1, 0, { id: rec.id, kind: kind });
    const r = rows.length > 0 ? rows[0] : new Record(tx.findCollectionByNameOrId("texts"));
    r.set("record", rec.id);
    r.set("kind", kind);
    r.set("content", typeof body.content === "string" ? body.content : "");
    r.set("segments", body.segments === undefined ? null : body.segments);
    // A Word document made from the text this replaces would no longer be this one (the literary step
    // makes the transcript's again once the recording is done).
    r.set("document", null);
    tx.save(r);
    return { id: r.id };
  });
}

// O6: the provider-side copies of an attempt were removed (or could not be: `error`).
// Not fenced: the sweep tends attempts of records no worker holds (done, halted,
// superseded). The first failure is journalled on the record; repeats only update the
// attempt.
function copiesRemoved(e) {
  const aid = e.request.pathValue("aid");
  return routes.handle(e, (body) => {
    const error = args.optText(body, "error", 2000) || "";
    const now = args.count(body, "now");
    $app.runInTransaction((tx) => {
      const r = found(tx, "recognition_attempts", aid, "attempt");
      if (error === "") {
        r.set("copies_removed_at", now);
        r.set("copies_error", "");
      } else {
        if (r.getString("copies_error") === "") {
          const rec = tx.findRecordById("audio_records", r.getString("record"));
          journal.add(tx, rec.id, rec.getString("state"), "note",
            "could not remove the provider-side copies of attempt " + aid + " (a sweep will try again): " + error, "worker");
        }
        r.set("copies_error", error);
      }
      tx.save(r);
    });
    return e.json(200, { ok: true });
  });
}

// No stored copy outgrows its use: the normalized copies of a recording done since before
// `done_before` lose their blobs (PocketBase deletes the files once the save commits);
// the rows stay as history with `removed_at` set, and the journal says so once. Not
// fenced (a done record has no claim), and guarded here rather than by the caller: a
// record that is not done (the owner set its stage back), halted, or done later is left
// as it is. The original, the playable copy and the transcript are never touched.
// Answers {removed, bytes}.
function removeNormalized(e) {
  const id = e.request.pathValue("id");
  return routes.handle(e, (body) => {
    const now = args.count(body, "now");
    const doneBefore = args.count(body, "done_before");
    const result = { removed: 0, bytes: 0 };
    $app.runInTransaction((tx) => {
      const rec = found(tx, "audio_records", id, "record");
      const doneAt = rec.getInt("state_entered_at");
      if (rec.getString("state") !== stages.DONE || rec.getString("halted_at") !== "" || doneAt > doneBefore) return;
      const rows = tx.findRecordsByFilter(
        "files", "record = {:id} && role = 'normalized' && blob != '' && removed_at = 0", "", 0, 0, { id: id });
      for (const r of rows) {
        result.removed += 1;
        result.bytes += r.getInt("size");
        r.set("blob", "");
        r.set("removed_at", now);
        tx.save(r);
      }
      if (result.removed === 0) return;
      const days = Math.max(0, now - doneAt) / 86400000;
      journal.add(tx, id, stages.DONE, "note",
        "normalized audio removed, the recording done " + days.toFixed(1) + " days ago: " + result.removed +
        " file(s), " + (result.bytes / 1e6).toFixed(1) + " MB; the original and the transcript stay " +
        "(set the stage to '" + stages.UPLOADED + "' to normalize again)", "worker");
    });
    return e.json(200, result);
  });
}

// A protected file (an original or normalized recording, a provider's raw response)
// streamed to the service user under its Authorization header. PocketBase's own file
// route takes a file token in the URL only, and its request log keeps every URL: the log
// kept the service account's tokens.
function download(e) {
  const collection = e.request.pathValue("collection");
  if (["files", "recognition_attempts"].indexOf(collection) < 0) {
    return respond.fail(e, 404, "not_found", "No such file.");
  }
  const filename = e.request.pathValue("filename");
  let rec;
  try {
    rec = $app.findRecordById(collection, e.request.pathValue("record"));
  } catch (_) {
    return respond.fail(e, 404, "not_found", "No such file.");
  }
  if (!rec.findFileFieldByFile(filename)) return respond.fail(e, 404, "not_found", "No such file.");
  const fsys = $app.newFilesystem();
  try {
    // http.ServeContent underneath: streamed, ranges honoured.
    fsys.serve(e.response, e.request, rec.baseFilesPath() + "/" + filename, filename);
  } finally {
    fsys.close();
  }
}

module.exports = {
  attachFile: attachFile, chargeAudio: chargeAudio, addAttempt: addAttempt, updateAttempt: updateAttempt, putText: putText,
  copiesRemoved: copiesRemoved, removeNormalized: removeNormalized, download: download,
};
