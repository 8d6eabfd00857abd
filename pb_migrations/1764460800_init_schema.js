/// <reference path="../pb_data/types.d.ts" />
// The first step of the data model (SPEC §2): the collections it started with.
// The model today is this file and the newer files beside it, applied in order
// (new collections, fields, indexes, rules, help texts). An applied migration is
// never edited: every change is a new file.
//
// Conventions that the claim and the fenced writes rely on:
// - every time the claim compares is a number of unix milliseconds;
// - `available_at` is the single sort key of the claim: the moment a record
//   becomes claimable (creation or release time, lease expiry, end of a
//   pause); 0 means "never" (done or halted). See pb_hooks/lib/queue.js.
migrate((app) => {
  const SERVICE = "@request.auth.collectionName = 'services'";
  const users = app.findCollectionByNameOrId("users");

  // Senders sign in, nothing more: their whole surface is the intake routes.
  users.listRule = null;
  users.viewRule = null;
  users.createRule = null;
  users.updateRule = null;
  users.deleteRule = null;
  app.save(users);

  const services = new Collection({
    type: "auth",
    name: "services",
    listRule: null,
    viewRule: null,
    createRule: null,
    updateRule: null,
    deleteRule: null,
    passwordAuth: { enabled: true, identityFields: ["email"] },
    fields: [
      { name: "name", type: "text", max: 100, help: "What this account is used for, e.g. sidecar." },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
      { name: "updated", type: "autodate", onCreate: true, onUpdate: true },
    ],
  });
  app.save(services);

  const topics = new Collection({
    type: "base",
    name: "topics",
    listRule: null, viewRule: null, createRule: null, updateRule: null, deleteRule: null,
    fields: [
      { name: "owner", type: "relation", required: true, collectionId: users.id, maxSelect: 1, cascadeDelete: false },
      { name: "name", type: "text", required: true, max: 200, presentable: true },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
      { name: "updated", type: "autodate", onCreate: true, onUpdate: true },
    ],
    indexes: ["CREATE UNIQUE INDEX idx_topics_owner_name ON topics (owner, name)"],
  });
  app.save(topics);

  const records = new Collection({
    type: "base",
    name: "audio_records",
    listRule: SERVICE,
    viewRule: SERVICE,
    createRule: null,
    updateRule: null,
    deleteRule: null,
    fields: [
      { name: "title", type: "text", max: 500, presentable: true, help: "The sender's title. The pipeline never changes it." },
      { name: "owner", type: "relation", required: true, collectionId: users.id, maxSelect: 1, cascadeDelete: false, help: "The sender who uploaded the recording." },
      { name: "state", type: "select", required: true, maxSelect: 1, values: ["uploaded", "normalized", "submitted", "transcribed", "done"],
        help: "The stage. Changing it restarts the record from that stage (claim released, attempts reset)." },
      { name: "halted_at", type: "date",
        help: "Set when the record is halted. Clear it to resume the record from its stage." },
      { name: "halt_code", type: "select", maxSelect: 1,
        values: ["attempts_exhausted", "stalled", "unsupported_media", "too_long", "provider_rejected", "provider_failed", "results_expired", "halted_by_owner"],
        help: "Why the record is halted, as a stable class (shown to the sender)." },
      { name: "halt_reason", type: "text", max: 2000, help: "Why the record is halted, in words (for the owner only)." },
      { name: "attempts", type: "number", onlyInt: true, min: 0, help: "Claims since the last success; the step is not run above the configured maximum." },
      { name: "brief", type: "text", max: 5000, help: "A short description (owner's field)." },
      { name: "topics", type: "relation", collectionId: topics.id, maxSelect: 5, cascadeDelete: false },
      { name: "state_entered_at", type: "number", onlyInt: true, min: 0, help: "When the record entered its stage (unix ms); the stall watchdog measures from here." },
      { name: "claim_token", type: "text", max: 100, help: "The current worker's claim; empty when no worker holds the record." },
      { name: "claim_expires_at", type: "number", onlyInt: true, min: 0, help: "When the current claim's lease ends (unix ms)." },
      { name: "paused_until", type: "number", onlyInt: true, min: 0, help: "The record waits until this moment (unix ms), e.g. for a provider." },
      { name: "available_at", type: "number", onlyInt: true, min: 0, help: "Claim order key (unix ms): when the record becomes claimable; 0 = never. Kept by the server." },
      { name: "queue_rev", type: "number", onlyInt: true, min: 0, help: "Grows with every pipeline change; lets a save from an outdated form keep the newer queue fields." },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
      { name: "updated", type: "autodate", onCreate: true, onUpdate: true },
    ],
    indexes: [
      // Serves the claim: range on available_at, ordered by (available_at, id).
      "CREATE INDEX idx_audio_records_claim ON audio_records (available_at, id)",
      "CREATE INDEX idx_audio_records_owner ON audio_records (owner, created)",
      "CREATE INDEX idx_audio_records_state ON audio_records (state)",
    ],
  });
  app.save(records);

  const files = new Collection({
    type: "base",
    name: "files",
    listRule: SERVICE, viewRule: SERVICE, createRule: null, updateRule: null, deleteRule: null,
    fields: [
      { name: "record", type: "relation", required: true, collectionId: records.id, maxSelect: 1, cascadeDelete: false },
      { name: "role", type: "select", required: true, maxSelect: 1, values: ["original", "normalized"], presentable: true },
      { name: "format", type: "text", max: 50, help: "File format, e.g. ogg_opus, wav_pcm16." },
      { name: "blob", type: "file", maxSelect: 1, maxSize: 8 * 1024 * 1024 * 1024, protected: true },
      { name: "name", type: "text", max: 300, help: "The file name as uploaded." },
      { name: "location", type: "text", max: 2000, help: "Where an external copy lives (e.g. an object storage URI)." },
      { name: "size", type: "number", onlyInt: true, min: 0 },
      { name: "duration_ms", type: "number", onlyInt: true, min: 0 },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
      { name: "updated", type: "autodate", onCreate: true, onUpdate: true },
    ],
    indexes: ["CREATE INDEX idx_files_record_role ON files (record, role)"],
  });
  app.save(files);

  const texts = new Collection({
    type: "base",
    name: "texts",
    listRule: null, viewRule: null, createRule: null, updateRule: null, deleteRule: null,
    fields: [
      { name: "record", type: "relation", required: true, collectionId: records.id, maxSelect: 1, cascadeDelete: false },
      { name: "kind", type: "select", required: true, maxSelect: 1, values: ["transcript", "literary"], presentable: true },
      { name: "content", type: "text", max: 50000000 },
      { name: "segments", type: "json", maxSize: 200 * 1024 * 1024, help: "Timed segments [{start, end, text, words?}] in seconds." },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
      { name: "updated", type: "autodate", onCreate: true, onUpdate: true },
    ],
    indexes: ["CREATE UNIQUE INDEX idx_texts_record_kind ON texts (record, kind)"],
  });
  app.save(texts);

  const attempts = new Collection({
    type: "base",
    name: "recognition_attempts",
    listRule: SERVICE, viewRule: SERVICE, createRule: null, updateRule: null, deleteRule: null,
    fields: [
      { name: "record", type: "relation", required: true, collectionId: records.id, maxSelect: 1, cascadeDelete: false },
      { name: "provider", type: "text", required: true, max: 50, presentable: true },
      { name: "model", type: "text", max: 200 },
      { name: "operation_id", type: "text", max: 200, help: "The provider's id of the recognition; set as soon as the provider accepts." },
      { name: "audio_uri", type: "text", max: 2000, help: "Where the provider reads the audio from." },
      { name: "status", type: "text", max: 50, help: "started, running, ready, failed, cleaned." },
      { name: "raw_response", type: "file", maxSelect: 1, maxSize: 1024 * 1024 * 1024, protected: true },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
      { name: "updated", type: "autodate", onCreate: true, onUpdate: true },
    ],
    indexes: ["CREATE INDEX idx_recognition_attempts_record ON recognition_attempts (record, created)"],
  });
  app.save(attempts);

  const events = new Collection({
    type: "base",
    name: "record_events",
    listRule: null, viewRule: null, createRule: null, updateRule: null, deleteRule: null,
    fields: [
      { name: "record", type: "relation", required: true, collectionId: records.id, maxSelect: 1, cascadeDelete: false },
      { name: "stage", type: "text", max: 50 },
      { name: "kind", type: "select", required: true, maxSelect: 1, presentable: true,
        values: ["accepted", "stage_entered", "step_failed", "postponed", "halted", "resumed", "stage_set", "released", "note"] },
      { name: "outcome_text", type: "text", max: 5000 },
      { name: "actor", type: "text", max: 50, help: "worker, owner or intake." },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
    ],
    indexes: ["CREATE INDEX idx_record_events_record ON record_events (record, created)"],
  });
  app.save(events);
}, (app) => {
  for (const name of ["record_events", "recognition_attempts", "texts", "files", "audio_records", "topics", "services"]) {
    try { app.delete(app.findCollectionByNameOrId(name)); } catch (_) { /* already gone */ }
  }
});
