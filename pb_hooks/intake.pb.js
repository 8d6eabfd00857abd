/// <reference path="../pb_data/types.d.ts" />
// The sender's whole surface (SPEC §4): upload a recording, poll it, list them, read the
// transcript; and, for the sender's page (pb_public/), the audio, resume and rename.
// Each route is one function of lib/intake.js (the upload) or lib/sender.js (the rest).
// Handlers require their modules: top-level variables of a *.pb.js file are not visible
// inside handlers.

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
routerAdd("GET", "/api/transcriber/records", (e) => require(`${__hooks}/lib/sender.js`).list(e), $apis.requireAuth("users"));

// I2: one recording's poll.
routerAdd("GET", "/api/transcriber/records/{id}", (e) => require(`${__hooks}/lib/sender.js`).poll(e), $apis.requireAuth("users"));

// I4: the finished transcript in a chosen format (owner only; 404 until done).
routerAdd("GET", "/api/transcriber/records/{id}/transcript", (e) => require(`${__hooks}/lib/sender.js`).transcript(e),
  $apis.requireAuth("users"));

// The literary text (the transcript edited to be read) in txt, md or docx (owner only; 404 until ready).
routerAdd("GET", "/api/transcriber/records/{id}/text", (e) => require(`${__hooks}/lib/sender.js`).text(e),
  $apis.requireAuth("users"));

// The recording as uploaded, for a player: HTTP ranges (206, Content-Range). The
// sender's Authorization header, or `?token=` with a file token of theirs
// (POST /api/files/token), which an <audio> element can carry (lib/sender.js).
routerAdd("GET", "/api/transcriber/records/{id}/audio", (e) => require(`${__hooks}/lib/sender.js`).audio(e));

// The sender clears a halt that another try can cure (lib/records.js, SENDER_RESUMABLE).
routerAdd("POST", "/api/transcriber/records/{id}/resume", (e) => require(`${__hooks}/lib/sender.js`).resume(e),
  $apis.requireAuth("users"), $apis.bodyLimit(1024));

// The sender changes a recording's title (the only field they can change).
routerAdd("PATCH", "/api/transcriber/records/{id}", (e) => require(`${__hooks}/lib/sender.js`).rename(e),
  $apis.requireAuth("users"), $apis.bodyLimit(64 * 1024));

// What the upload form offers: the languages, the largest upload, the halts a sender may resume.
routerAdd("GET", "/api/transcriber/options", (e) => require(`${__hooks}/lib/sender.js`).options(e));

// The names and terms the sender teaches recognition (lib/words.js): read and replaced as a whole.
routerAdd("GET", "/api/transcriber/words", (e) => require(`${__hooks}/lib/words.js`).read(e), $apis.requireAuth("users"));
routerAdd("PUT", "/api/transcriber/words", (e) => require(`${__hooks}/lib/words.js`).write(e),
  $apis.requireAuth("users"), $apis.bodyLimit(64 * 1024));
