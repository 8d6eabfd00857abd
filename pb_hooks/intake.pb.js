/// <reference path="../pb_data/types.d.ts" />
// The sender's whole surface (SPEC §4): upload a recording, poll it, list them, read the
// transcript; and, for the sender's page (pb_public/), the audio, resume and rename.
// Handlers require their modules: top-level variables of a *.pb.js file are
// not visible inside handlers.

// The body limit must fit the configured maximum upload plus the multipart
// envelope; the route itself answers a clear 413 for a file over the limit.
routerAdd(
  "POST",
  "/api/transcriber/records",
  (e) => require(`${__hooks}/lib/intake.js`).create(e),
  $apis.requireAuth("users"),
  $apis.bodyLimit(require(`${__hooks}/lib/settings.js`).get("intake", "max_upload_mb") * 1024 * 1024 + 1024 * 1024),
);

// O12: the sender's own recordings, newest first, a page at a time (the poll body without the text).
routerAdd(
  "GET",
  "/api/transcriber/records",
  (e) => {
    const records = require(`${__hooks}/lib/records.js`);
    const respond = require(`${__hooks}/lib/respond.js`);
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
  },
  $apis.requireAuth("users"),
);

routerAdd(
  "GET",
  "/api/transcriber/records/{id}",
  (e) => {
    const records = require(`${__hooks}/lib/records.js`);
    const respond = require(`${__hooks}/lib/respond.js`);
    const rec = records.findOwned($app, e.request.pathValue("id"), e.auth.id);
    if (!rec) return respond.fail(e, 404, "not_found", "No such recording.");
    return e.json(200, records.pollBody($app, rec));
  },
  $apis.requireAuth("users"),
);

// I4: the finished transcript in a chosen format (owner only; 404 until done).
routerAdd(
  "GET",
  "/api/transcriber/records/{id}/transcript",
  (e) => {
    const records = require(`${__hooks}/lib/records.js`);
    const respond = require(`${__hooks}/lib/respond.js`);
    const exports_ = require(`${__hooks}/lib/exports.js`);
    const format = String(e.request.url.query().get("format") || "txt");
    if (["txt", "srt", "vtt", "json"].indexOf(format) < 0) {
      return respond.fail(e, 400, "bad_format", "Unknown format '" + format.slice(0, 20) + "': use txt, srt, vtt or json.");
    }
    const rec = records.findOwned($app, e.request.pathValue("id"), e.auth.id);
    const stages = require(`${__hooks}/lib/stages.js`);
    const row = rec && stages.isTerminal(rec.getString("state")) ? records.transcriptOf($app, rec.id) : null;
    if (!row) return respond.fail(e, 404, "not_found", "No finished transcript for this recording.");
    const insight = format === "json" ? require(`${__hooks}/lib/insights.js`).view($app, rec, true) : null;
    const out = exports_.render(row, format, rec, insight);
    e.response.header().set("Content-Type", out.type);
    return e.string(200, out.body);
  },
  $apis.requireAuth("users"),
);

// The recording as uploaded, for a player: HTTP ranges (206, Content-Range). The
// sender's Authorization header, or `?token=` with a file token of theirs
// (POST /api/files/token), which an <audio> element can carry (lib/sender.js).
routerAdd("GET", "/api/transcriber/records/{id}/audio", (e) => require(`${__hooks}/lib/sender.js`).audio(e));

// The sender clears a halt that another try can cure (lib/records.js, SENDER_RESUMABLE).
routerAdd(
  "POST",
  "/api/transcriber/records/{id}/resume",
  (e) => require(`${__hooks}/lib/sender.js`).resume(e),
  $apis.requireAuth("users"),
);

// The sender changes a recording's title (the only field they can change).
routerAdd(
  "PATCH",
  "/api/transcriber/records/{id}",
  (e) => require(`${__hooks}/lib/sender.js`).rename(e),
  $apis.requireAuth("users"),
  $apis.bodyLimit(64 * 1024),
);

// What the upload form offers: the languages, the largest upload, the halts a sender may resume.
routerAdd("GET", "/api/transcriber/options", (e) => require(`${__hooks}/lib/sender.js`).options(e));
