// I1: accept one recording from a sender. Everything cheap to check is
// checked before anything is written; the record and its original file row
// are then created in one transaction, so a failure leaves nothing behind.
const respond = require(`${__hooks}/lib/respond.js`);
const media = require(`${__hooks}/lib/media.js`);
const records = require(`${__hooks}/lib/records.js`);
const queue = require(`${__hooks}/lib/queue.js`);
const quotas = require(`${__hooks}/lib/quotas.js`);

const MAX_TITLE = 500;
const ALLOWED_FIELDS = ["file", "title", "language"];

function maxUploadBytes() {
  return respond.envInt("TRANSCRIBER_INTAKE__MAX_UPLOAD_MB", 1024) * 1024 * 1024;
}

function readHead(file, n) {
  const reader = file.reader.open();
  try {
    return toBytes(reader, n);
  } finally {
    reader.close();
  }
}

function create(e) {
  const ctype = String(e.request.header.get("Content-Type") || "");
  if (ctype.toLowerCase().indexOf("multipart/form-data") !== 0) {
    return respond.fail(e, 400, "not_multipart", "Send the recording as multipart/form-data with a 'file' field.");
  }

  let files;
  try {
    files = e.findUploadedFiles("file");
  } catch (err) {
    const msg = String(err);
    if (msg.indexOf("multipart: message too large") >= 0) {
      // Go's form reader says so for too many parts or headers, whatever the size.
      return respond.fail(e, 400, "bad_upload", "The form has too many parts: send one 'file' and at most 'title' and 'language'.");
    }
    if (msg.indexOf("too large") >= 0) {
      return respond.fail(e, 413, "too_large", "The upload is larger than the limit of " + Math.floor(maxUploadBytes() / 1048576) + " MB.");
    }
    if (msg.indexOf("no such file") >= 0 || msg.indexOf("missing") >= 0) {
      return respond.fail(e, 400, "missing_file", "The request has no 'file' field with the recording.");
    }
    return respond.fail(e, 400, "bad_upload", "The upload could not be read as multipart form data.");
  }
  if (!files || files.length === 0) {
    return respond.fail(e, 400, "missing_file", "The request has no 'file' field with the recording.");
  }
  if (files.length > 1) {
    return respond.fail(e, 400, "too_many_files", "Send exactly one recording per request (got " + files.length + ").");
  }

  const form = e.request.multipartForm;
  for (const key in form.value) {
    if (ALLOWED_FIELDS.indexOf(key) < 0) {
      return respond.fail(e, 400, "unknown_field", "Unknown form field '" + String(key).slice(0, 50) + "': only 'file', 'title' and 'language' are accepted.");
    }
  }
  for (const key in form.file) {
    if (key !== "file") {
      return respond.fail(e, 400, "unknown_field", "Unknown file field '" + String(key).slice(0, 50) + "': send the recording as 'file'.");
    }
  }

  const file = files[0];
  if (file.size <= 0) {
    return respond.fail(e, 400, "empty_file", "The uploaded file is empty.");
  }
  if (file.size > maxUploadBytes()) {
    return respond.fail(e, 413, "too_large", "The file is " + Math.ceil(file.size / 1048576) + " MB; the limit is " + Math.floor(maxUploadBytes() / 1048576) + " MB.");
  }
  const container = media.sniff(readHead(file, 512));
  if (container === "") {
    return respond.fail(e, 415, "not_audio", "The file is not a known audio or video format (its first bytes match no audio/video container).");
  }

  const title = String(e.request.formValue("title") || "").trim();
  const titleChars = Array.from(title).length; // characters, not UTF-16 units: an emoji is one
  if (titleChars > MAX_TITLE) {
    return respond.fail(e, 400, "title_too_long", "The title is " + titleChars + " characters; at most " + MAX_TITLE + " are accepted.");
  }

  // L3: an optional language hint, one of the schema's codes ("" or "auto": none).
  const language = String(e.request.formValue("language") || "").trim().toLowerCase();
  if (language !== "" && language !== "auto" && records.languages($app).indexOf(language) < 0) {
    return respond.fail(e, 400, "unknown_language",
      "Unknown language '" + language.slice(0, 20) + "': use an ISO 639-1 code such as 'ru' or 'en', or leave it out to have the language found.");
  }

  const owner = e.auth.id;
  const now = respond.nowMs();
  let created = null;
  let over = null;
  $app.runInTransaction((tx) => {
    over = quotas.exceeded(tx, owner, now);
    if (over) return;
    const rec = new Record(tx.findCollectionByNameOrId("audio_records"));
    rec.set("owner", owner);
    rec.set("title", title);
    rec.set("state", "uploaded");
    rec.set("state_entered_at", now);
    rec.set("attempts", 0);
    if (language !== "" && language !== "auto") rec.set("language_hint", language);
    tx.save(rec);
    queue.enqueue(tx, rec);

    const row = new Record(tx.findCollectionByNameOrId("files"));
    row.set("record", rec.id);
    row.set("role", "original");
    row.set("format", container);
    row.set("name", String(file.originalName || file.name).slice(0, 300));
    row.set("size", file.size);
    row.set("blob", file);
    tx.save(row);

    records.journal(tx, rec.id, "uploaded", "accepted", "accepted " + file.size + " bytes (" + container + ")", "intake");
    created = rec;
  });
  if (over) return quotas.refuse(e, over);
  return e.json(201, records.pollBody($app, created));
}

module.exports = { create: create, maxUploadBytes: maxUploadBytes };
