package server

import "github.com/wasmhooks/wasmhooks/server/api"

// The API's shared types live in package api (standard library only, for
// clients); these are the same types under the server's name.
type (
	Problem        = api.Problem
	Role           = api.Role
	KeyDoc         = api.KeyDoc
	CreditDoc      = api.CreditDoc
	ModuleDoc      = api.ModuleDoc
	VersionDoc     = api.VersionDoc
	SignatureDoc   = api.SignatureDoc
	ApprovalView   = api.ApprovalView
	ResultDoc      = api.ResultDoc
	KeyInfo        = api.KeyInfo
	SigningKeyDoc  = api.SigningKeyDoc
	AuditVerifyDoc = api.AuditVerifyDoc
)

// The roles (api.Role*).
const (
	RoleAdmin     = api.RoleAdmin
	RolePublisher = api.RolePublisher
	RoleOperator  = api.RoleOperator
	RoleRuntime   = api.RoleRuntime
)

// The problem codes (api.Code*).
const (
	CodeUnauthenticated   = api.CodeUnauthenticated
	CodeForbidden         = api.CodeForbidden
	CodeNotFound          = api.CodeNotFound
	CodeMalformedJSON     = api.CodeMalformedJSON
	CodeInvalidRequest    = api.CodeInvalidRequest
	CodeBodyTooLarge      = api.CodeBodyTooLarge
	CodeUnsupportedMedia  = api.CodeUnsupportedMedia
	CodeConflict          = api.CodeConflict
	CodeUnknownVersion    = api.CodeUnknownVersion
	CodeDigestMismatch    = api.CodeDigestMismatch
	CodeSignatureRequired = api.CodeSignatureRequired
	CodeBadSignature      = api.CodeBadSignature
	CodeInvalidConfig     = api.CodeInvalidConfig
	CodeNoChain           = api.CodeNoChain
	CodeShuttingDown      = api.CodeShuttingDown
	CodeTimeout           = api.CodeTimeout
	CodeInternal          = api.CodeInternal
	CodeRateLimited       = api.CodeRateLimited
	CodeUnavailable       = api.CodeUnavailable
	CodeAuthLimited       = api.CodeAuthLimited
	CodeMethodNotAllowed  = api.CodeMethodNotAllowed
	CodeQuotaExceeded     = api.CodeQuotaExceeded
	CodeRunInProgress     = api.CodeRunInProgress
	CodeBodyTimeout       = api.CodeBodyTimeout
)

// SigningMessage is api.SigningMessage.
func SigningMessage(ref, digest, manifestDigest string) []byte {
	return api.SigningMessage(ref, digest, manifestDigest)
}

// SigningKeyID is api.SigningKeyID.
func SigningKeyID(pub []byte) string { return api.SigningKeyID(pub) }
