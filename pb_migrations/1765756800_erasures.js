/// <reference path="../pb_data/types.d.ts" />
// The audit of erasures: when a sender's data is erased on request
// (`transcriber sender erase`), one row says so and outlives the erased rows.
// It keeps no personal data: the sender's id and a hash of the address, the
// counts, when and who. Read-only for everyone but the owner; never deleted.
migrate((app) => {
  const erasures = new Collection({
    type: "base",
    name: "erasures",
    fields: [
      { name: "sender_id", type: "text", required: true, help: "The erased sender's account id." },
      { name: "email_sha256", type: "text", required: true, help: "SHA-256 of the erased address (lower-cased), to answer 'was X erased?' without keeping X." },
      { name: "recordings", type: "number", onlyInt: true, min: 0 },
      { name: "files", type: "number", onlyInt: true, min: 0, help: "Stored files removed (originals, normalized pieces, raw results)." },
      { name: "bytes", type: "number", onlyInt: true, min: 0 },
      { name: "provider_copies", type: "number", onlyInt: true, min: 0, help: "Provider-side copies removed before the rows." },
      { name: "account_erased", type: "bool" },
      { name: "by", type: "text", help: "Who ran the erase (the host user)." },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
    ],
    listRule: null, viewRule: null, createRule: null, updateRule: null, deleteRule: null,
  });
  app.save(erasures);
}, (app) => {
  app.delete(app.findCollectionByNameOrId("erasures"));
});
