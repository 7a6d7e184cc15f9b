package catalog_test

import (
	"fmt"

	"github.com/orgedge/edge/orgsvc/catalog"
)

func ExampleCatalog_Search() {
	for _, b := range catalog.Builtin().Search("web frontend") {
		fmt.Println(b.ID, b.VCPUs, b.MemoryGB)
	}
	// Output:
	// node-20-web 2 2
	// static-site 1 1
}

func ExampleValidate() {
	content := `
name: shop
services:
  web:
    image: nginx:1.27
    ports: [80, 80]
    depends_on: [db]
`
	for _, v := range catalog.Validate(content) {
		fmt.Printf("%s: %s\n", v.Path, v.Message)
	}
	// Output:
	// services.web.ports[1]: duplicate port 80
	// services.web.depends_on[0]: no service named "db"
}
