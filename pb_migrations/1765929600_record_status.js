/// <reference path="../pb_data/types.d.ts" />
// The sender's live status: one row per recording, named by the recording's
// id, holding what the poll shows of it (`poll`: the poll body without the
// text) and its `owner`. The hooks write it whenever that changes and its
// owner has a realtime subscription open (pb_hooks/lib/live.js), so that
// PocketBase's own realtime delivers the change to that sender alone: the
// list and view rules below admit the owner, and PocketBase checks them for
// every event and every subscriber.
//
// Realtime only: the records API of this collection is closed to everyone but
// the owner of the service (pb_hooks/live.pb.js), so a sender's whole surface
// stays the documented routes (ST3). Nothing here is a source of truth; a row
// may lag behind its recording while nobody listens.
migrate((app) => {
  const users = app.findCollectionByNameOrId("users");
  const status = new Collection({
    type: "base",
    name: "record_status",
    listRule: "@request.auth.collectionName = 'users' && owner = @request.auth.id",
    viewRule: "@request.auth.collectionName = 'users' && owner = @request.auth.id",
    createRule: null,
    updateRule: null,
    deleteRule: null,
    fields: [
      { name: "owner", type: "relation", required: true, collectionId: users.id, maxSelect: 1, cascadeDelete: false,
        help: "The sender whose recording this is; only they receive its events." },
      { name: "poll", type: "json", maxSize: 64 * 1024,
        help: "What the poll (GET /api/transcriber/records/{id}) shows of the recording, without the text." },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
      { name: "updated", type: "autodate", onCreate: true, onUpdate: true },
    ],
    indexes: ["CREATE INDEX idx_record_status_owner ON record_status (owner)"],
  });
  app.save(status);
}, (app) => {
  app.delete(app.findCollectionByNameOrId("record_status"));
});
