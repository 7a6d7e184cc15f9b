package config

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Service-account roles of the default operation table (design, Identity).
const (
	RoleAdmin      = "svc-admin"
	RoleEnvManager = "svc-env-manager"
	RoleViewer     = "svc-viewer"
)

// ProcedureInfo describes one procedure of the API, as its generated
// descriptor declares it.
type ProcedureInfo struct {
	// Service is the service's full name, "svc.v1.EnvironmentService".
	Service string
	// Method is the method's name, "WatchEnvironment".
	Method string
	// ClientStreaming and ServerStreaming are the descriptor's flags. A
	// procedure with neither is unary.
	ClientStreaming bool
	ServerStreaming bool
	// NoSideEffects: the method declares idempotency_level NO_SIDE_EFFECTS.
	NoSideEffects bool
}

// Streaming reports whether either side of the call streams.
func (p ProcedureInfo) Streaming() bool {
	return p.ClientStreaming || p.ServerStreaming
}

// apiPackage is the protobuf package whose services the edge fronts. Taking
// it from a generated file also makes sure the package's descriptors are
// registered before procedures runs.
var apiPackage = svcv1.File_svc_v1_organization_proto.Package()

// procedures reads every service of apiPackage from the registry once, so
// that a method added to a .proto file is known here after regeneration
// without editing this package.
var procedures = sync.OnceValue(func() map[string]ProcedureInfo {
	m := make(map[string]ProcedureInfo)
	protoregistry.GlobalFiles.RangeFilesByPackage(apiPackage, func(fd protoreflect.FileDescriptor) bool {
		services := fd.Services()
		for i := range services.Len() {
			sd := services.Get(i)
			methods := sd.Methods()
			for j := range methods.Len() {
				md := methods.Get(j)
				m["/"+string(sd.FullName())+"/"+string(md.Name())] = ProcedureInfo{
					Service:         string(sd.FullName()),
					Method:          string(md.Name()),
					ClientStreaming: md.IsStreamingClient(),
					ServerStreaming: md.IsStreamingServer(),
					NoSideEffects: md.Options().(*descriptorpb.MethodOptions).GetIdempotencyLevel() ==
						descriptorpb.MethodOptions_NO_SIDE_EFFECTS,
				}
			}
		}
		return true
	})
	return m
})

// Procedures returns every procedure of the API ("/svc.v1.<Service>/<Method>")
// with its descriptor's facts. The map is the caller's own copy; to classify
// a request, LookupProcedure avoids the copy.
func Procedures() map[string]ProcedureInfo {
	return maps.Clone(procedures())
}

// LookupProcedure returns the procedure named by an HTTP path such as
// "/svc.v1.EnvironmentService/WatchEnvironment"; ok is false for a path that
// names no procedure of the API.
func LookupProcedure(procedure string) (info ProcedureInfo, ok bool) {
	info, ok = procedures()[procedure]
	return info, ok
}

// BuiltinProcedures are the procedures the edge answers itself instead of
// the backend: gRPC server reflection, v1 and v1alpha (edge/reflection), so
// that grpcurl and buf curl need no schema of their own, and gRPC's health
// service (edge/health), so that probes aimed at the API port learn the
// edge's readiness. They go through the chain like any call: classified,
// bounded, logged and counted; reflection is authenticated and limited too,
// health needs no token (docs/api.md, "Reflection" and "Health"). They are
// not rows of the operation table: the edge's policy gives them their rule
// (edge/policy).
var BuiltinProcedures = map[string]ProcedureInfo{
	"/" + HealthService + "/Check": {Service: HealthService, Method: "Check", NoSideEffects: true},
	"/" + HealthService + "/Watch": {Service: HealthService, Method: "Watch", ServerStreaming: true, NoSideEffects: true},
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": {Service: "grpc.reflection.v1.ServerReflection",
		Method: "ServerReflectionInfo", ClientStreaming: true, ServerStreaming: true, NoSideEffects: true},
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": {Service: "grpc.reflection.v1alpha.ServerReflection",
		Method: "ServerReflectionInfo", ClientStreaming: true, ServerStreaming: true, NoSideEffects: true},
}

// HealthService is gRPC's health service, which the edge answers without a
// token (see BuiltinProcedures).
const HealthService = "grpc.health.v1.Health"

// readPrefixes mark the methods every service-account role may call.
var readPrefixes = []string{"Get", "List", "Watch", "Search"}

// isRead reports whether a method only reads: its name starts with one of
// readPrefixes as a whole word ("GetUsage", not "Getaway").
func isRead(method string) bool {
	for _, p := range readPrefixes {
		rest, ok := strings.CutPrefix(method, p)
		if !ok {
			continue
		}
		if r, _ := utf8.DecodeRuneInString(rest); rest == "" || unicode.IsUpper(r) {
			return true
		}
	}
	return false
}

// Procedures the configuration names on its own.
const (
	procCreateEnvironment = "/svc.v1.EnvironmentService/CreateEnvironment"
	procDeleteEnvironment = "/svc.v1.EnvironmentService/DeleteEnvironment"
)

// operationLimits are the specification's per-operation limits, and the
// quota steps, of the default operation table.
var operationLimits = map[string]Operation{
	procCreateEnvironment:                         {RatePerMinute: 10, Quota: QuotaReserveEnvironment},
	procDeleteEnvironment:                         {Quota: QuotaReleaseEnvironment},
	"/svc.v1.EnvironmentService/WatchEnvironment": {ConcurrentStreams: 20},
	"/svc.v1.BlueprintService/SearchCatalog":      {RatePerMinute: 30},
	"/svc.v1.BlueprintService/ValidateBlueprint":  {RatePerMinute: 30},
}

// DefaultOperations returns the shipped operation table: one row per
// procedure of the API, sorted by procedure, following the design's rules.
//
//   - A read (a method named Get*, List*, Watch* or Search*) may be called by
//     svc-admin, svc-env-manager and svc-viewer.
//   - Any other method of EnvironmentService or BlueprintService by
//     svc-admin and svc-env-manager.
//   - Everything else by svc-admin only.
//
// Idempotency-Key is honored on every unary method of OrganizationService and
// EnvironmentService that changes something. A method is read-only when the
// API declares it without side effects. The specification's
// per-operation limits apply: CreateEnvironment 10 per minute, SearchCatalog
// and ValidateBlueprint 30 per minute, WatchEnvironment 20 concurrent
// streams; CreateEnvironment reserves quota and DeleteEnvironment releases
// it. Each call returns a new slice that the caller may change.
func DefaultOperations() []Operation {
	procs := procedures()
	ops := make([]Operation, 0, len(procs))
	for _, name := range slices.Sorted(maps.Keys(procs)) {
		p := procs[name]
		op := Operation{Procedure: name}
		service := strings.TrimPrefix(p.Service, string(apiPackage)+".")
		read := isRead(p.Method)
		switch {
		case read:
			op.ServiceAccountRoles = []string{RoleAdmin, RoleEnvManager, RoleViewer}
		case service == "EnvironmentService", service == "BlueprintService":
			op.ServiceAccountRoles = []string{RoleAdmin, RoleEnvManager}
		default:
			op.ServiceAccountRoles = []string{RoleAdmin}
		}
		switch service {
		case "OrganizationService", "EnvironmentService":
			op.Idempotent = !read && !p.Streaming()
		}
		op.ReadOnly = p.NoSideEffects
		if l, ok := operationLimits[name]; ok {
			op.RatePerMinute, op.ConcurrentStreams, op.Quota = l.RatePerMinute, l.ConcurrentStreams, l.Quota
		}
		ops = append(ops, op)
	}
	return ops
}
