/// <reference path="../pb_data/types.d.ts" />
// The sender's whole surface (SPEC §4): upload a recording, poll it.
// Handlers require their modules: top-level variables of a *.pb.js file are
// not visible inside handlers.

// The body limit must fit the configured maximum upload plus the multipart
// envelope; the route itself answers a clear 413 for a file over the limit.
routerAdd(
  "POST",
  "/api/transcriber/records",
  (e) => require(`${__hooks}/lib/intake.js`).create(e),
  $apis.requireAuth("users"),
  $apis.bodyLimit((parseInt($os.getenv("TRANSCRIBER_INTAKE__MAX_UPLOAD_MB"), 10) || 1024) * 1024 * 1024 + 1024 * 1024),
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
    const row = rec && rec.getString("state") === "done" ? records.transcriptOf($app, rec.id) : null;
    if (!row) return respond.fail(e, 404, "not_found", "No finished transcript for this recording.");
    const out = exports_.render(row, format, rec);
    e.response.header().set("Content-Type", out.type);
    return e.string(200, out.body);
  },
  $apis.requireAuth("users"),
);
