/// <reference path="../pb_data/types.d.ts" />
// Words a sender teaches recognition: names and terms their recordings use
// (users.words, one per line), which recognition is biased towards together
// with the names of the sender's topics (pb_hooks/lib/words.js). The owner
// edits them in the panel, the sender through PUT /api/transcriber/words.

migrate((app) => {
  const users = app.findCollectionByNameOrId("users");
  users.fields.add(new TextField({
    name: "words",
    max: 4000,
    help: "Names and terms this sender's recordings use, one per line (e.g. people, places, products): " +
      "recognition is biased towards them and towards the sender's topics. At most 60 are used.",
  }));
  app.save(users);
}, (app) => {
  const users = app.findCollectionByNameOrId("users");
  users.fields.removeByName("words");
  app.save(users);
});
