// Package catalog is the backend's catalog of blueprints, the templates
// environments are made from, and the checker for blueprint documents.
//
// It provides three things: [Builtin], the fixed catalog the service ships
// with; [Catalog.Lookup], to resolve the blueprint id an environment is
// created from; [Catalog.Search], to filter the catalog by a query; and
// [Validate], to check a blueprint document and list its violations.
//
// It is plain Go and knows nothing of protocols or callers: the service layer
// converts to and from the API's messages, limits the size of documents
// (1 MiB) and paginates search results. It does not store blueprints, run
// them, or pull the images they name.
//
// # Blueprint documents
//
// A blueprint document is YAML or JSON (JSON is read as YAML, of which it is
// a subset) holding one mapping:
//
//	name: my-stack            # required, a DNS label
//	description: free text    # optional, at most 2000 characters
//	services:                 # required, 1 to 50 services, keyed by DNS-label names
//	  web:
//	    image: nginx:1.27     # required, not empty, no whitespace
//	    ports: [8080]         # optional, each 1 to 65535, no duplicates within the service
//	    env: {KEY: value}     # optional, keys match ^[A-Za-z_][A-Za-z0-9_]*$,
//	                          # values are strings, numbers or booleans
//	    depends_on: [db]      # optional, each names another service of the document,
//	                          # no duplicates, no dependency cycles
//	    resources: {vcpus: 2, memory_gb: 4}  # optional, vcpus 1 to 64, memory_gb 1 to 512
//
// A DNS label is 1 to 63 characters of a-z, 0-9 and '-' that neither starts
// nor ends with '-'.
//
// Every field listed is the only field allowed at its place; any other is a
// violation, as is a value of the wrong type (a port must be an integer, not
// "8080"), a repeated key, or more than one document in the content. An
// optional field set to null counts as absent. Anchors and aliases (&a, *a)
// are not allowed, since a few bytes of aliases can stand for gigabytes of
// data: a document that has any gets one violation, at the first, and no
// other check.
//
// A violation's path is dotted from the top of the document, with sequence
// indexes in brackets (services.web.ports[1]); a key that is not made of
// letters, digits, '_' and '-' is quoted in brackets (services["my web"]).
// The path is empty for the document as a whole.
package catalog
