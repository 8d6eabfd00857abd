/// <reference path="../pb_data/types.d.ts" />
// The pipeline's internal routes: the atomic claim and the fenced writes.
// Open to the service user only (anonymous 401, any other account 403).
// The protocol itself is in lib/queue.js.

routerAdd("POST", "/api/pipeline/claim", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  return routes.handle(e, (body) => {
    const now = routes.num(body, "now");
    if (typeof body.leases !== "object" || body.leases === null) throw new queue.Invalid("'leases' must map stages to lease milliseconds");
    // The insights step's lease, when the caller takes that work too (only when no recording waits).
    const insightsLease = body.insights_lease === undefined || body.insights_lease === null ? 0 : routes.num(body, "insights_lease");
    // A claimer that asks gets a recording's files and attempts with it (rows, never their content:
    // ST7), which its step reads first: read and checked inside the claim's transaction.
    const result = queue.claim($app, now, body.leases, insightsLease, body.with_rows === true);
    // Rows the claim could not read were halted on the way (`unclaimable`): the claimer logs and counts them.
    if (result.setAside.length > 0) e.response.header().set("X-Set-Aside", result.setAside.join(","));
    const got = result.claimed;
    // P1: {id, token}; a claimer that asks gets the record's queue fields too (saves a read).
    if (got) {
      if (body.with_record === true) return e.json(200, got);
      return e.json(200, got.queue ? { id: got.id, token: got.token, queue: got.queue } : { id: got.id, token: got.token });
    }
    // Stopped setting rows aside before finding work: more may be due at once.
    if (result.more) {
      e.response.header().set("X-Next-Available-At", String(now));
      return e.noContent(204);
    }
    const next = queue.nextAvailableAt($app, now, insightsLease > 0);
    if (next > 0) e.response.header().set("X-Next-Available-At", String(next));
    return e.noContent(204);
  });
}, $apis.requireAuth("services"));

// The one fenced write that settles a claim (or keeps it: `extended`,
// `progressed`), for both queues: a recording's stages (records/…) and its
// insights (insights/…). Body: {token, now, outcome, …the outcome's own
// arguments}; the outcomes and what each writes are lib/queue.js's OUTCOMES.
// Answers 200 with the row as written (the claim's shape), 409 fenced_out
// when the claim is no longer the caller's, 400 for a bad request.
for (const queueName of ["records", "insights"]) {
  routerAdd("POST", "/api/pipeline/" + queueName + "/{id}/settle", (e) => {
    const routes = require(`${__hooks}/lib/routes.js`);
    const queue = require(`${__hooks}/lib/queue.js`);
    const table = e.request.url.path.split("/")[3] === "insights" ? "insights" : "audio_records";
    const id = e.request.pathValue("id");
    return routes.handle(e, (body) => {
      const token = queue.strArg(body, "token", 100);
      const now = routes.num(body, "now");
      const outcome = queue.strArg(body, "outcome", 50);
      return e.json(200, queue.settle($app, table, id, token, now, outcome, body));
    });
  }, $apis.requireAuth("services"));
}

// What the insights step reads, under its claim: the recording's transcript
// and its owner's dictionary of topics. The owner comes from the row, never
// from the caller: no request can carry another sender's topics.
routerAdd("POST", "/api/pipeline/insights/{id}/source", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  const insights = require(`${__hooks}/lib/insights.js`);
  const id = e.request.pathValue("id");
  return routes.handle(e, (body) => {
    const token = queue.strArg(body, "token", 100);
    const out = queue.underFence($app, id, token, (tx, row) => insights.source(tx, row), "insights");
    return e.json(200, out);
  });
}, $apis.requireAuth("services"));

// The brief (with the quotes that ground it) and the topics, written under the
// claim in one transaction: new topics join the owner's dictionary, the brief and
// the topics land on the recording.
routerAdd("POST", "/api/pipeline/insights/{id}/result", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  const insights = require(`${__hooks}/lib/insights.js`);
  const id = e.request.pathValue("id");
  return routes.handle(e, (body) => {
    const token = queue.strArg(body, "token", 100);
    const now = routes.num(body, "now");
    queue.underFence($app, id, token, (tx, row) => insights.store(tx, row, body, now), "insights");
    return e.json(200, { ok: true });
  });
}, $apis.requireAuth("services"));

// A journal note of the insights step (on its recording's journal).
routerAdd("POST", "/api/pipeline/insights/{id}/events", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  const records = require(`${__hooks}/lib/records.js`);
  const id = e.request.pathValue("id");
  return routes.handle(e, (body) => {
    const token = queue.strArg(body, "token", 100);
    queue.underFence($app, id, token, (tx, row) => {
      const key = routes.optStr(body, "write_key", 100) || "";
      if (queue.writtenBefore(tx, "record_events", row.getString("record"), key)) return;
      records.journal(tx, row.getString("record"), "insights", "note", queue.strArg(body, "text", 5000), "worker", key);
    }, "insights");
    return e.json(200, { ok: true });
  });
}, $apis.requireAuth("services"));

// A file of the record, attached under the fence: a piece of normalized audio
// (role `normalized`), or the copy a browser plays of an original it cannot
// (role `playable`); never an original, which only intake stores. A piece
// without speech (a silent recording) is a row without a blob: nothing in it
// is ever sent anywhere, so nothing of it is kept but its place and length.
routerAdd("POST", "/api/pipeline/records/{id}/files", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  const id = e.request.pathValue("id");
  return routes.handle(e, (body) => {
    const token = queue.strArg(body, "token", 100);
    const role = queue.strArg(body, "role", 50);
    if (["normalized", "playable"].indexOf(role) < 0) throw new queue.Invalid("'role' must be normalized or playable");
    const multipart = String(e.request.header.get("Content-Type") || "").indexOf("multipart/form-data") === 0;
    const blobs = multipart ? e.findUploadedFiles("blob") || [] : [];
    const silent = body.speech_ms !== undefined && body.speech_ms !== "" && routes.num(body, "speech_ms") === 0;
    if (blobs.length > 1 || (blobs.length === 0 && (!silent || role === "playable"))) {
      throw new queue.Invalid("exactly one 'blob' file is required (none only for a piece without speech)");
    }
    const row = queue.underFence($app, id, token, (tx) => {
      const key = routes.optStr(body, "write_key", 100) || "";
      const earlier = queue.writtenBefore(tx, "files", id, key);
      if (earlier) return earlier;  // O4: a repeat of a write that landed
      const r = new Record(tx.findCollectionByNameOrId("files"));
      r.set("record", id);
      r.set("write_key", key);
      r.set("role", role);
      r.set("format", routes.optStr(body, "format", 50) || "");
      r.set("name", blobs.length ? blobs[0].originalName : "");
      r.set("size", blobs.length ? blobs[0].size : 0);
      r.set("duration_ms", routes.optNum(body, "duration_ms"));
      for (const f of ["piece", "pieces", "offset_ms", "speech_ms"]) r.set(f, routes.optNum(body, f));
      r.set("location", routes.optStr(body, "location", 2000) || "");
      // Where the speech is in the piece ([start, end] pairs in ms), found once at normalize.
      const speech = typeof body.speech === "string" && body.speech !== "" ? JSON.parse(body.speech) : body.speech;
      if (Array.isArray(speech)) r.set("speech", speech);
      if (blobs.length) r.set("blob", blobs[0]);
      tx.save(r);
      return r;
    });
    return e.json(200, row);
  });
}, $apis.requireAuth("services"), $apis.bodyLimit(0));

// H4: normalize measured the recording's decoded length. It is charged to the
// sender's day in place of intake's reservation, in the fenced transaction;
// when it breaks the quota nothing is charged and the answer says why (the
// step halts the record over_quota, before any recognition).
routerAdd("POST", "/api/pipeline/records/{id}/audio", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  const quotas = require(`${__hooks}/lib/quotas.js`);
  const id = e.request.pathValue("id");
  return routes.handle(e, (body) => {
    const token = queue.strArg(body, "token", 100);
    const duration = routes.num(body, "duration_ms");
    const over = queue.underFence($app, id, token, (tx, rec) => {
      // The recording's length, kept once: everything after normalize reads it from here.
      tx.db().newQuery("UPDATE audio_records SET duration_ms = {:ms} WHERE id = {:id}").bind({ id: id, ms: duration }).execute();
      return quotas.measured(tx, rec, duration, Date.now());
    });
    return e.json(200, over ? { fits: false, reason: over } : { fits: true });
  });
}, $apis.requireAuth("services"));

// P18: the attempt row exists before the provider is called.
routerAdd("POST", "/api/pipeline/records/{id}/attempts", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  const id = e.request.pathValue("id");
  return routes.handle(e, (body) => {
    const token = queue.strArg(body, "token", 100);
    const row = queue.underFence($app, id, token, (tx) => {
      const key = routes.optStr(body, "write_key", 100) || "";
      const earlier = queue.writtenBefore(tx, "recognition_attempts", id, key);
      if (earlier) return earlier;  // O4: a repeat of a write that landed
      const r = new Record(tx.findCollectionByNameOrId("recognition_attempts"));
      r.set("record", id);
      r.set("write_key", key);
      r.set("provider", queue.strArg(body, "provider", 50));
      r.set("model", routes.optStr(body, "model", 200) || "");
      r.set("status", routes.optStr(body, "status", 50) || "started");
      r.set("audio_uri", routes.optStr(body, "audio_uri", 2000) || "");
      r.set("piece", routes.optNum(body, "piece"));
      r.set("offset_ms", routes.optNum(body, "offset_ms"));
      tx.save(r);
      return r;
    });
    return e.json(200, row);
  });
}, $apis.requireAuth("services"));

// Updates an attempt: operation id, audio location, status, raw response, and
// that its provider-side copies are gone (`copies_removed_at`). Answers the row.
routerAdd("POST", "/api/pipeline/records/{id}/attempts/{aid}", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  const id = e.request.pathValue("id");
  const aid = e.request.pathValue("aid");
  return routes.handle(e, (body) => {
    const token = queue.strArg(body, "token", 100);
    let raw = [];
    const ctype = String(e.request.header.get("Content-Type") || "");
    if (ctype.indexOf("multipart/form-data") === 0) raw = e.findUploadedFiles("raw_response") || [];
    const row = queue.underFence($app, id, token, (tx) => {
      let r;
      try {
        r = tx.findRecordById("recognition_attempts", aid);
      } catch (_) {
        throw new queue.Invalid("no such attempt");
      }
      if (r.getString("record") !== id) throw new queue.Invalid("the attempt belongs to another record");
      for (const f of ["operation_id", "audio_uri", "status", "model"]) {
        const v = routes.optStr(body, f, 2000);
        if (v !== null) r.set(f, v);
      }
      if (body.copies_removed_at !== undefined) {
        r.set("copies_removed_at", routes.num(body, "copies_removed_at"));
        r.set("copies_error", "");
      }
      if (raw.length === 1) r.set("raw_response", raw[0]);
      tx.save(r);
      return r;
    });
    return e.json(200, row);
  });
}, $apis.requireAuth("services"), $apis.bodyLimit(0));

// The record's text of one kind, created or replaced (one row per kind).
routerAdd("PUT", "/api/pipeline/records/{id}/texts/{kind}", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  const records = require(`${__hooks}/lib/records.js`);
  const id = e.request.pathValue("id");
  const kind = e.request.pathValue("kind");
  return routes.handle(e, (body) => {
    const token = queue.strArg(body, "token", 100);
    const row = queue.underFence($app, id, token, (tx) => {
      // The transcript's language lands with it (L3); a code outside the schema's list is not kept.
      const language = routes.optStr(body, "language", 10);
      if (language !== null && records.languages(tx).indexOf(language) >= 0) {
        tx.db().newQuery("UPDATE audio_records SET language = {:language} WHERE id = {:id}").bind({ id: id, language: language }).execute();
      }
      const found = tx.findRecordsByFilter("texts", "record = {:id} && kind = {:kind}", "", 1, 0, { id: id, kind: kind });
      const r = found.length > 0 ? found[0] : new Record(tx.findCollectionByNameOrId("texts"));
      r.set("record", id);
      r.set("kind", kind);
      r.set("content", typeof body.content === "string" ? body.content : "");
      r.set("segments", body.segments === undefined ? null : body.segments);
      tx.save(r);
      return r;
    });
    return e.json(200, { id: row.id });
  });
}, $apis.requireAuth("services"), $apis.bodyLimit(256 * 1024 * 1024));

// A journal note from the step (e.g. "provider operation started").
routerAdd("POST", "/api/pipeline/records/{id}/events", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  const records = require(`${__hooks}/lib/records.js`);
  const id = e.request.pathValue("id");
  return routes.handle(e, (body) => {
    const token = queue.strArg(body, "token", 100);
    const kind = routes.optStr(body, "kind", 50) || "note";
    if (["note", "failed"].indexOf(kind) < 0) throw new queue.Invalid("events may only be notes or failed tries");
    queue.underFence($app, id, token, (tx, rec) => {
      const key = routes.optStr(body, "write_key", 100) || "";
      if (queue.writtenBefore(tx, "record_events", id, key)) return;  // O4: a repeat of a note that landed
      records.journal(tx, id, rec.getString("state"), kind, queue.strArg(body, "text", 5000), "worker", key);
    });
    return e.json(200, { ok: true });
  });
}, $apis.requireAuth("services"));

// O6: the provider-side copies of an attempt were removed (or could not be:
// `error`). Not fenced: the sweep tends attempts of records no worker holds
// (done, halted, superseded). The first failure is journalled on the record;
// repeats only update the attempt.
routerAdd("POST", "/api/pipeline/attempts/{aid}/copies", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  const records = require(`${__hooks}/lib/records.js`);
  const aid = e.request.pathValue("aid");
  return routes.handle(e, (body) => {
    const error = routes.optStr(body, "error", 2000) || "";
    const now = routes.num(body, "now");
    $app.runInTransaction((tx) => {
      let r;
      try {
        r = tx.findRecordById("recognition_attempts", aid);
      } catch (_) {
        throw new queue.Invalid("no such attempt");
      }
      if (error === "") {
        r.set("copies_removed_at", now);
        r.set("copies_error", "");
      } else {
        if (r.getString("copies_error") === "") {
          const rec = tx.findRecordById("audio_records", r.getString("record"));
          records.journal(tx, rec.id, rec.getString("state"), "note",
            "could not remove the provider-side copies of attempt " + aid + " (a sweep will try again): " + error, "worker");
        }
        r.set("copies_error", error);
      }
      tx.save(r);
    });
    return e.json(200, { ok: true });
  });
}, $apis.requireAuth("services"));

// No stored copy outgrows its use: the normalized copies of a recording done
// since before `done_before` lose their blobs (PocketBase deletes the files
// once the save commits); the rows stay as history with `removed_at` set, and
// the journal says so once. Not fenced (a done record has no claim), and
// guarded here rather than by the caller: a record that is not done (the
// owner set its stage back), halted, or done later is left as it is. The
// original, the playable copy and the transcript are never touched.
routerAdd("POST", "/api/pipeline/records/{id}/normalized/remove", (e) => {
  const routes = require(`${__hooks}/lib/routes.js`);
  const queue = require(`${__hooks}/lib/queue.js`);
  const records = require(`${__hooks}/lib/records.js`);
  const stages = require(`${__hooks}/lib/stages.js`);
  const id = e.request.pathValue("id");
  return routes.handle(e, (body) => {
    const now = routes.num(body, "now");
    const doneBefore = routes.num(body, "done_before");
    const result = { removed: 0, bytes: 0 };
    $app.runInTransaction((tx) => {
      let rec;
      try {
        rec = tx.findRecordById("audio_records", id);
      } catch (_) {
        throw new queue.Invalid("no such record");
      }
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
      records.journal(tx, id, stages.DONE, "note",
        "normalized audio removed, the recording done " + days.toFixed(1) + " days ago: " + result.removed +
        " file(s), " + (result.bytes / 1e6).toFixed(1) + " MB; the original and the transcript stay " +
        "(set the stage to '" + stages.UPLOADED + "' to normalize again)", "worker");
    });
    return e.json(200, result);
  });
}, $apis.requireAuth("services"));

// A protected file (an original or normalized recording, a provider's raw
// response) streamed to the service user under its Authorization header.
// PocketBase's own file route takes a file token in the URL only, and its
// request log keeps every URL: the log kept the service account's tokens.
routerAdd("GET", "/api/pipeline/files/{collection}/{record}/{filename}", (e) => {
  const respond = require(`${__hooks}/lib/respond.js`);
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
}, $apis.requireAuth("services"));
