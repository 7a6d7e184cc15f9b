package catalog

// builtinBlueprints is the catalog the service ships with. An environment
// refers to its blueprint by id, so an id, once shipped, must not change or
// be removed.
var builtinBlueprints = []Blueprint{
	{
		ID:          "postgres-16",
		Name:        "PostgreSQL 16",
		Description: "A PostgreSQL 16 server with the pgvector extension and nightly backups.",
		Tags:        []string{"database", "sql", "postgres"},
		VCPUs:       2,
		MemoryGB:    4,
	},
	{
		ID:          "redis-7",
		Name:        "Redis 7",
		Description: "An in-memory Redis 7 cache with append-only persistence.",
		Tags:        []string{"cache", "key-value", "redis"},
		VCPUs:       1,
		MemoryGB:    2,
	},
	{
		ID:          "kafka-3",
		Name:        "Apache Kafka 3",
		Description: "A three-broker Kafka 3.8 cluster in KRaft mode, without ZooKeeper.",
		Tags:        []string{"streaming", "messaging", "queue", "kafka"},
		VCPUs:       6,
		MemoryGB:    12,
	},
	{
		ID:          "elasticsearch-8",
		Name:        "Elasticsearch 8",
		Description: "A single-node Elasticsearch 8 engine with Kibana, for full-text search and logs.",
		Tags:        []string{"search", "logging", "elasticsearch"},
		VCPUs:       4,
		MemoryGB:    8,
	},
	{
		ID:          "go-api",
		Name:        "Go API",
		Description: "A Go 1.26 HTTP API with a PostgreSQL connection pool, health checks and Prometheus metrics.",
		Tags:        []string{"go", "api", "backend"},
		VCPUs:       2,
		MemoryGB:    2,
	},
	{
		ID:          "java-spring",
		Name:        "Java Spring Boot",
		Description: "A Spring Boot 3 service on Java 21 with Actuator and Flyway migrations.",
		Tags:        []string{"java", "spring", "api", "backend"},
		VCPUs:       4,
		MemoryGB:    8,
	},
	{
		ID:          "node-20-web",
		Name:        "Node.js 20 web app",
		Description: "An Express server on Node.js 20, with npm and hot reload for development.",
		Tags:        []string{"node", "javascript", "typescript", "web", "frontend"},
		VCPUs:       2,
		MemoryGB:    2,
	},
	{
		ID:          "django-5",
		Name:        "Django 5 web app",
		Description: "Django 5 on Python 3.12, served by Gunicorn, with a PostgreSQL database.",
		Tags:        []string{"python", "django", "web", "backend"},
		VCPUs:       2,
		MemoryGB:    4,
	},
	{
		ID:          "python-ml-notebook",
		Name:        "Python ML notebook",
		Description: "JupyterLab on Python 3.12 with NumPy, pandas, scikit-learn and PyTorch.",
		Tags:        []string{"python", "ml", "jupyter", "notebook", "data"},
		VCPUs:       8,
		MemoryGB:    32,
	},
	{
		ID:          "static-site",
		Name:        "Static site",
		Description: "nginx serving a static build, with gzip and long-lived cache headers.",
		Tags:        []string{"static", "nginx", "web", "frontend"},
		VCPUs:       1,
		MemoryGB:    1,
	},
}
