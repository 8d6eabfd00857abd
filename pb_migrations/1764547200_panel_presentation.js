/// <reference path="../pb_data/types.d.ts" />
// How the admin panel (the owner's only UI) presents the data model: field
// order (= the order of the list columns and of the edit form), the fields a
// relation shows as its label, and help texts.
//
// Presentation only: no rule, field name, type, option or index changes, so
// nothing the hooks or the sidecar rely on moves (the claim SQL and the fenced
// writes use raw column names; the order of the fields is not the order of the
// table's columns).
//
// Each collection is described twice, as this migration leaves it and as the
// first migration left it, so the down step restores exactly what was there.

const KEPT = "Kept by the pipeline: an edit here is ignored.";

const AFTER = {
  users: {
    fields: {
      // A sender has an email and seldom a name: without this the owner column
      // of every recording and topic reads "N/A".
      email: { presentable: true },
    },
  },
  audio_records: {
    order: [
      "id", "title", "state", "halt_code", "halt_reason", "halted_at", "attempts", "created", "owner",
      "brief", "topics", "state_entered_at", "paused_until", "claim_token", "claim_expires_at", "available_at",
      "queue_rev", "updated",
    ],
    fields: {
      // The relation label of a recording (journal, files, attempts, texts):
      // its id, with a copy button for the search record = "<id>", and its
      // title (many recordings have none).
      id: {
        presentable: true,
        help: "This recording's id. Its journal, files, recognition attempts and texts: open record_events, " +
          "files, recognition_attempts or texts and search record = \"<this id>\".",
      },
      title: { help: "The sender's title (may be empty). The pipeline never changes it." },
      state: {
        help: "The stage: uploaded → normalized → submitted → transcribed → done. Changing it and saving " +
          "restarts the record from that stage (claim released, attempts reset); the change is journalled.",
      },
      halted_at: {
        help: "Set while the record is halted: the pipeline leaves it alone. Halt: pick any date, say why in " +
          "halt_reason, save. Resume from the stage: clear the date, save. If the pipeline moved the record " +
          "after this form was opened, neither is applied (the journal notes it): reopen the record.",
      },
      halt_code: {
        help: "Why the record is halted, as a stable class (shown to the sender). Set by the pipeline; a halt " +
          "made here is always halted_by_owner.",
      },
      halt_reason: {
        help: "Why the record is halted, in words (for the owner only). When you halt the record here, what " +
          "you write is kept.",
      },
      attempts: {
        help: "Claims of the current stage since its last success; above the configured maximum the record " +
          "halts with attempts_exhausted. " + KEPT,
      },
      brief: { help: "A short description (owner's field: the pipeline never changes it)." },
      topics: { help: "The sender's topics this recording is filed under." },
      state_entered_at: {
        help: "When the record entered its stage (unix ms); the stall watchdog measures from here. " + KEPT,
      },
      claim_token: { help: "The current worker's claim; empty when no worker holds the record. " + KEPT },
      claim_expires_at: { help: "When the current claim's lease ends (unix ms). " + KEPT },
      paused_until: {
        help: "The record waits until this moment (unix ms), e.g. for a provider; 0 = not paused. " + KEPT,
      },
      available_at: {
        help: "Claim order key (unix ms): when the record becomes claimable; 0 = never (done or halted). " + KEPT,
      },
      queue_rev: {
        help: "Grows with every pipeline change; a save from a form opened before the last change keeps the " +
          "newer queue fields. " + KEPT,
      },
    },
  },
  files: {
    order: ["id", "record", "role", "name", "blob", "format", "duration_ms", "size", "location", "created", "updated"],
    fields: {
      record: { help: "The recording this file belongs to." },
      role: {
        help: "original: as the sender uploaded it, never replaced; normalized: the copy made for the " +
          "recognition provider.",
      },
      blob: { help: "The audio file itself." },
      size: { help: "Size in bytes." },
      duration_ms: { help: "Length of the audio in milliseconds; 0 = not measured (the original is measured " +
        "through its normalized copy)." },
    },
  },
  recognition_attempts: {
    order: [
      "id", "record", "provider", "model", "status", "raw_response", "created", "operation_id", "audio_uri",
      "updated",
    ],
    fields: {
      record: { help: "The recording this attempt recognizes." },
      provider: { help: "The recognition service called: offline, instant, speechkit or openai." },
      model: { help: "The provider's model." },
      status: {
        help: "started, running, ready (raw response stored), failed, cleaned (transcript stored, the provider-side " +
          "copy removed).",
      },
      raw_response: {
        help: "The provider's answer exactly as received; the transcript in texts is parsed from it.",
      },
    },
  },
  texts: {
    fields: {
      record: { help: "The recording this text belongs to." },
      kind: { help: "transcript: the recognized text." },
      content: { help: "The whole text, without timing." },
    },
  },
  record_events: {
    fields: {
      record: {
        help: "The recording this journal entry is about. A recording's journal: search record = \"<its id>\".",
      },
      stage: { help: "The record's stage when this happened." },
      kind: { help: "What happened: accepted, stage_entered, step_failed, postponed, halted, resumed, stage_set, " +
        "released or note." },
      outcome_text: { help: "What happened, in words." },
    },
  },
};

// As 1764460800_init_schema.js (and PocketBase's default users) left them.
const BEFORE = {
  users: { fields: { email: { presentable: false } } },
  audio_records: {
    order: [
      "id", "title", "owner", "state", "halted_at", "halt_code", "halt_reason", "attempts", "brief", "topics",
      "state_entered_at", "claim_token", "claim_expires_at", "paused_until", "available_at", "queue_rev",
      "created", "updated",
    ],
    fields: {
      id: { presentable: false, help: "" },
      title: { help: "The sender's title. The pipeline never changes it." },
      state: { help: "The stage. Changing it restarts the record from that stage (claim released, attempts reset)." },
      halted_at: { help: "Set when the record is halted. Clear it to resume the record from its stage." },
      halt_code: { help: "Why the record is halted, as a stable class (shown to the sender)." },
      halt_reason: { help: "Why the record is halted, in words (for the owner only)." },
      attempts: { help: "Claims since the last success; the step is not run above the configured maximum." },
      brief: { help: "A short description (owner's field)." },
      topics: { help: "" },
      state_entered_at: { help: "When the record entered its stage (unix ms); the stall watchdog measures from here." },
      claim_token: { help: "The current worker's claim; empty when no worker holds the record." },
      claim_expires_at: { help: "When the current claim's lease ends (unix ms)." },
      paused_until: { help: "The record waits until this moment (unix ms), e.g. for a provider." },
      available_at: {
        help: "Claim order key (unix ms): when the record becomes claimable; 0 = never. Kept by the server.",
      },
      queue_rev: {
        help: "Grows with every pipeline change; lets a save from an outdated form keep the newer queue fields.",
      },
    },
  },
  files: {
    order: ["id", "record", "role", "format", "blob", "name", "location", "size", "duration_ms", "created", "updated"],
    fields: {
      record: { help: "" },
      role: { help: "" },
      blob: { help: "" },
      size: { help: "" },
      duration_ms: { help: "" },
    },
  },
  recognition_attempts: {
    order: [
      "id", "record", "provider", "model", "operation_id", "audio_uri", "status", "raw_response", "created",
      "updated",
    ],
    fields: {
      record: { help: "" },
      provider: { help: "" },
      model: { help: "" },
      status: { help: "started, running, ready, failed, cleaned." },
      raw_response: { help: "" },
    },
  },
  texts: {
    fields: {
      record: { help: "" },
      kind: { help: "" },
      content: { help: "" },
    },
  },
  record_events: {
    fields: {
      record: { help: "" },
      stage: { help: "" },
      kind: { help: "" },
      outcome_text: { help: "" },
    },
  },
};

function present(app, spec) {
  for (const name of Object.keys(spec)) {
    const collection = app.findCollectionByNameOrId(name);
    const { order, fields } = spec[name];
    for (const fieldName of Object.keys(fields)) {
      const field = collection.fields.getByName(fieldName);
      if (!field) throw new Error(`${name}.${fieldName}: no such field`);
      for (const [key, value] of Object.entries(fields[fieldName])) field[key] = value;
    }
    if (order) {
      const names = collection.fields.fieldNames();
      if (names.length !== order.length || !order.every((n) => names.includes(n))) {
        throw new Error(`${name}: the order lists ${order.join(",")} but the fields are ${names.join(",")}`);
      }
      order.forEach((fieldName, pos) => collection.fields.addAt(pos, collection.fields.getByName(fieldName)));
    }
    app.save(collection);
  }
}

migrate((app) => present(app, AFTER), (app) => present(app, BEFORE));
