// Package record is the vocabulary of the history log: records and their
// kinds, the payloads of each kind, cursors and starting points of
// subscriptions, filters, contract index entries, list parameters, and the
// storage layer's sentinel errors. It imports only the chain vocabulary
// (chainsync/chain) and the Marlowe language (contracts/marlowe), so that
// clients (streaming/client, streaming/protocol), the query API and the
// contract projection use the log's types without linking the actors, the
// ledger or a database driver (TestLeafDependencies checks it).
package record
