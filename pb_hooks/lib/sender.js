// What a sender does with their own recordings once uploaded (intake.pb.js; the
// sender's page uses these, and so may any client): list and poll them, read the
// transcript, listen to the audio, resume a halt another try can cure, change the
// title, and learn what the upload form offers. Someone else's recording answers the
// same 404 as a missing id, everywhere.
const datetimes = require("./datetimes.js");
const exports_ = require("./exports.js");
const insights = require("./insights.js");
const literary = require("./literary.js");
const intake = require("./intake.js");
const journal = require("./journal.js");
const live = require("./live.js");
const password = require("./password.js");
const quotas = require("./quotas.js");
const records = require("./records.js");
const respond = require("./respond.js");
const settle = require("./settle.js");
const stages = require("./stages.js");
const titles = require("./titles.js");

const MAX_TITLE = 500;
const MAX_TITLE_BYTES = 4 * MAX_TITLE;

function notFound(e) {
  return respond.fail(e, 404, "not_found", "No such recording.");
}

// GET /api/transcriber/records?page=&perPage= (O12): the sender's own recordings, newest
// first, a page at a time (the poll body without the text).
function list(e) {
  const query = e.request.url.query();
  const page = parseInt(query.get("page") || "1", 10);
  const perPage = parseInt(query.get("perPage") || "30", 10);
  if (!(page >= 1 && page <= 1000000) || !(perPage >= 1 && perPage <= 500)) {
    return respond.fail(e, 400, "bad_page", "page must be 1 or more and perPage from 1 to 500.");
  }
  const total = $app.countRecords("audio_records", $dbx.hashExp({ owner: e.auth.id }));
  const rows = $app.findRecordsByFilter(
    "audio_records", "owner = {:owner}", "-created,-id", perPage, (page - 1) * perPage, { owner: e.auth.id });
  return e.json(200, {
    page: page,
    perPage: perPage,
    totalItems: total,
    totalPages: Math.ceil(total / perPage),
    items: rows.map((r) => records.pollBody($app, r, false)),
  });
}

// GET /api/transcriber/records/{id} (I2): the poll.
function poll(e) {
  const rec = records.findOwned($app, e.request.pathValue("id"), e.auth.id);
  if (!rec) return notFound(e);
  return e.json(200, records.pollBody($app, rec));
}

// The DOCX type, as the Word documents are served.
const DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";

// A download named after the recording (its title, or `fallback`), in `format`.
function named(e, rec, format, fallback) {
  const base = (rec.getString("title") || fallback).replace(/[^\p{L}\p{N}._ -]+/gu, "_").slice(0, 100);
  const ascii = base.replace(/[^A-Za-z0-9._ -]/g, "_");
  const disposition = "attachment; filename=\"" + ascii + "." + format + "\"; filename*=UTF-8''" +
    encodeURIComponent(base + "." + format);
  e.response.header().set("Content-Disposition", disposition);
  e.response.header().set("Cache-Control", "private, no-cache");
}

// The Word document `file` of the texts row `row` (a `kind` of text), as a download.
function serveDocx(e, rec, row, file) {
  named(e, rec, "docx", row.getString("kind") === "transcript" ? "transcript" : "text");
  const fsys = $app.newFilesystem();
  try {
    e.response.header().set("Content-Type", DOCX);
    fsys.serve(e.response, e.request, row.baseFilesPath() + "/" + file, file);
  } finally {
    fsys.close();
  }
}

// GET /api/transcriber/records/{id}/transcript?format= (I4): the finished transcript in
// txt, srt, vtt, json or docx; 404 until done. The DOCX is made by the literary step from the
// transcript as it stands (a correction removes the old one and queues the step again): 404
// while it is being made.
function transcript(e) {
  const format = String(e.request.url.query().get("format") || "txt");
  if (["txt", "srt", "vtt", "json", "docx"].indexOf(format) < 0) {
    return respond.fail(e, 400, "bad_format", "Unknown format '" + format.slice(0, 20) + "': use txt, srt, vtt, json or docx.");
  }
  const rec = records.findOwned($app, e.request.pathValue("id"), e.auth.id);
  const row = rec && stages.isTerminal(rec.getString("state")) ? records.transcriptOf($app, rec.id) : null;
  if (!row) return respond.fail(e, 404, "not_found", "No finished transcript for this recording.");
  if (format === "docx") {
    const file = row.getString("document");
    if (!file) {
      return respond.fail(e, 404, "not_found",
        "No Word document of this transcript yet (it is made with the literary text: the poll's 'literary' says when it is ready).");
    }
    return serveDocx(e, rec, row, file);
  }
  const insight = format === "json" ? insights.view($app, rec, true) : null;
  const out = exports_.render(row, format, rec, insight);
  e.response.header().set("Content-Type", out.type);
  return e.string(200, out.body);
}

// GET /api/transcriber/records/{id}/text?format= : the literary text (the transcript edited to be
// read) in txt, md, docx or json; 404 until it is ready (the poll's `literary`).
function text(e) {
  const format = String(e.request.url.query().get("format") || "txt");
  if (["txt", "md", "docx", "json"].indexOf(format) < 0) {
    return respond.fail(e, 400, "bad_format", "Unknown format '" + format.slice(0, 20) + "': use txt, md, docx or json.");
  }
  const rec = records.findOwned($app, e.request.pathValue("id"), e.auth.id);
  if (!rec) return notFound(e);
  const out = literary.rendered($app, rec, format);
  if (!out) return respond.fail(e, 404, "not_found", "No literary text for this recording yet (the poll's 'literary' says when it is ready).");
  if (out.json) return e.json(200, out.json);
  if (format === "docx") return serveDocx(e, rec, out.row, out.file);
  named(e, rec, format, "text");
  e.response.header().set("Content-Type", out.type);
  return e.string(200, out.body);
}

// The signed-in sender: from the Authorization header, or, for an <audio>
// element that cannot send one, from `?token=` holding a PocketBase file
// token of theirs (POST /api/files/token: a few minutes long, good for files
// only). The token is taken out of the URL before PocketBase's request log
// records it, whichever of the two names the sender. Null when neither does.
function sender(e) {
  const query = e.request.url.query();
  const token = String(query.get("token") || "");
  if (query.has("token")) {
    query.del("token");
    e.request.url.rawQuery = query.encode();
  }
  if (e.auth) return e.auth;
  if (token === "") return null;
  try {
    const user = $app.findAuthRecordByToken(token, "file");
    return user.collection().name === "users" ? user : null;
  } catch (_) {
    return null;
  }
}

// GET /api/transcriber/records/{id}/audio: what a browser can play of the
// recording — the original as uploaded, or, where a browser cannot play that,
// its playable copy once normalize made it (the poll's `playback`) — with HTTP
// range requests (206 and Content-Range), so a player can seek. `?file=original`
// or `?file=playable` asks for one of the two.
function audio(e) {
  const user = sender(e); // first: a `?token=` leaves the URL whatever is answered
  if (e.auth && e.auth.collection().name !== "users") {
    return respond.fail(e, 403, "forbidden", "Only the sender of a recording can listen to it here.");
  }
  if (!user) return respond.fail(e, 401, "unauthorized", "Sign in as the sender of this recording.");
  const which = String(e.request.url.query().get("file") || "");
  if (["", "original", "playable"].indexOf(which) < 0) {
    return respond.fail(e, 400, "bad_file", "Unknown file '" + which.slice(0, 20) + "': use original or playable, or leave it out.");
  }
  const rec = records.findOwned($app, e.request.pathValue("id"), user.id);
  if (!rec) return notFound(e);
  const files = records.audioFiles($app, rec.id);
  let row = files.original;
  if (which === "playable" || (which === "" && records.playbackOf(rec, files) === "copy")) row = files.copy;
  const name = row ? row.getString("blob") : "";
  if (name === "" && which === "playable") {
    return respond.fail(e, 404, "not_found", "This recording has no playable copy: its original plays as it is, " +
      "or the copy is not made yet.");
  }
  if (name === "") return notFound(e);
  const header = e.response.header();
  const key = row.baseFilesPath() + "/" + name;
  const fsys = $app.newFilesystem();
  try {
    // http.ServeContent underneath: ranges, If-Range, HEAD; streamed from storage. Its
    // 412 and 416 are plain text: those two are answered here first, as JSON.
    const attrs = fsys.attributes(key);
    const size = attrs.size;
    if (preconditionFails(e, attrs.modTime.unixMilli())) {
      return respond.fail(e, 412, "precondition_failed", "The file does not meet the request's If-Match or " +
        "If-Unmodified-Since (this route sends no ETag: only If-Match: * matches).");
    }
    if (!rangeServable(e, size)) {
      header.set("Content-Range", "bytes */" + size);
      return respond.fail(e, 416, "range_not_satisfiable", "The Range asked for is not within the file's " + size +
        " bytes (ask for bytes=FIRST-LAST or bytes=-LAST_N, counted from 0).");
    }
    // The sender's alone: no shared cache keeps it.
    header.set("Cache-Control", "private, max-age=3600");
    header.set("Content-Disposition", "inline; filename=\"" + name.replace(/[^A-Za-z0-9._-]/g, "_") + "\"");
    fsys.serve(e.response, e.request, key, name);
  } finally {
    fsys.close();
  }
}

// Whether ServeContent answers 412 (its checkIfMatch, then checkIfUnmodifiedSince, mirrored):
// no ETag is sent, so an If-Match matches only as "*"; If-Unmodified-Since fails for a
// file changed after it (whole seconds), and is ignored when it is no date.
function preconditionFails(e, modifiedMs) {
  const match = String(e.request.header.get("If-Match") || "");
  if (match !== "") return match.split(",").every((tag) => tag.trim() !== "*");
  const since = Date.parse(String(e.request.header.get("If-Unmodified-Since") || ""));
  if (isNaN(since) || !(modifiedMs > 0)) return false;
  return Math.floor(modifiedMs / 1000) * 1000 > since;
}

// Whether Go's http.ServeContent, given the request's Range, serves the file of `size`
// bytes rather than answering 416 as plain text (its parseRange, mirrored): so that a 416
// is answered here, as JSON. An If-Range lets ServeContent drop the Range: left to it.
function rangeServable(e, size) {
  const range = String(e.request.header.get("Range") || "");
  if (range === "" || String(e.request.header.get("If-Range") || "") !== "" || !(size > 0)) return true;
  if (range.indexOf("bytes=") !== 0) return false;
  let any = false;
  let past = false;
  for (const raw of range.slice(6).split(",")) {
    const spec = raw.trim();
    if (spec === "") continue;
    const dash = spec.indexOf("-");
    if (dash < 0) return false;
    const first = spec.slice(0, dash).trim();
    const last = spec.slice(dash + 1).trim();
    if (first === "") {
      if (!/^\d{1,19}$/.test(last)) return false; // a suffix: the last N bytes
      any = true;
      continue;
    }
    if (!/^\d{1,19}$/.test(first) || (last !== "" && !/^\d{1,19}$/.test(last))) return false;
    if (Number(first) >= size) {
      past = true;
      continue;
    }
    if (last !== "" && Number(first) > Number(last)) return false;
    any = true;
  }
  return !(past && !any);
}

// POST /api/transcriber/records/{id}/resume
function resume(e) {
  const now = Date.now();
  const out = settle.resumeBySender($app, e.request.pathValue("id"), e.auth.id, now, (tx, rec) => {
    const why = records.resumeRefusal(tx, rec);
    if (why) return { status: 409, code: why.code, message: why.message };
    // Halted over_quota: only when its measured length fits what is left of the day.
    const overQuota = rec.getString("halt_code") === records.OVER_QUOTA;
    const tooMuch = overQuota ? quotas.resumeExceeded(tx, rec, now) : null;
    if (tooMuch) return { status: 429, code: tooMuch.code, retryAfter: tooMuch.retryAfter, message: tooMuch.message };
    // Resumed, it waits again: the quota of recordings waiting at once holds.
    const over = quotas.waitingExceeded(tx, rec.getString("owner"));
    if (over) {
      return { status: 429, code: over.code, retryAfter: over.retryAfter,
        message: over.message.replace("upload more", "resume it") };
    }
    // Not normalized yet: its audio counts on the day of the resume; an over_quota
    // halt holds its measured length from now on (normalize measures it again).
    if (rec.getString("state") === stages.UPLOADED) {
      quotas.rechargedAt(tx, rec, now, overQuota ? rec.getInt("duration_ms") : null);
    }
    return null;
  });
  if (out.refused) {
    if (out.refused.retryAfter) e.response.header().set("Retry-After", String(out.refused.retryAfter));
    return respond.fail(e, out.refused.status, out.refused.code, out.refused.message);
  }
  return e.json(200, records.pollBody($app, out.record));
}

// PATCH /api/transcriber/records/{id} with {"title": "…"}: the title, and nothing else.
function rename(e) {
  let body;
  try {
    body = e.requestInfo().body || {};
  } catch (_) {
    return respond.fail(e, 400, "invalid_title", "Send a JSON object with a 'title' string.");
  }
  if (typeof body.title !== "string") {
    return respond.fail(e, 400, "invalid_title", "Send a JSON object with a 'title' string.");
  }
  for (const key in body) {
    if (key !== "title") return respond.fail(e, 400, "unknown_field", "Only the 'title' of a recording can be changed.");
  }
  const title = body.title.trim();
  const chars = Array.from(title).length;
  if (chars > MAX_TITLE || toBytes(body.title).length > MAX_TITLE_BYTES) {
    return respond.fail(e, 400, "title_too_long", "The title is " + chars + " characters; at most " + MAX_TITLE + " are accepted.");
  }
  const badTitle = titles.refusal(title);
  if (badTitle) return respond.fail(e, 400, badTitle.code, badTitle.message);
  const owner = e.auth.id;
  let saved = null;
  $app.runInTransaction((tx) => {
    const rec = records.findOwned(tx, e.request.pathValue("id"), owner);
    if (!rec) return;
    if (rec.getString("title") !== title) {
      const now = Date.now();
      tx.db().newQuery("UPDATE audio_records SET title = {:title}, updated = {:upd} WHERE id = {:id}")
        .bind({ id: rec.id, title: title, upd: datetimes.dbTime(now) }).execute();
      journal.add(tx, rec.id, rec.getString("state"), "note", "title changed by the sender", "sender");
    }
    saved = tx.findRecordById("audio_records", rec.id);
    live.publish(tx, saved);
  });
  if (!saved) return notFound(e);
  return e.json(200, records.pollBody($app, saved));
}

// GET /api/transcriber/options: what the upload form offers, whether a forgotten password can be reset
// by mail (the owner set up SMTP in the panel: Settings → Mail), and how long a password may be. No
// sign-in: nothing here is private.
function options(e) {
  const smtp = $app.settings().smtp;
  return e.json(200, {
    languages: records.languages($app),
    max_upload_bytes: intake.maxUploadBytes(),
    resumable_halt_codes: records.SENDER_RESUMABLE,
    password_reset: Boolean(smtp.enabled && String(smtp.host || "") !== ""),
    password_length: password.lengthLimits($app.findCollectionByNameOrId("users")),
  });
}

module.exports = {
  list: list, poll: poll, transcript: transcript, text: text, audio: audio, resume: resume, rename: rename, options: options,
};
