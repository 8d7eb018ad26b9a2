package api

// ChunkInfo is what the hot path needs to know about one stream chunk.
type ChunkInfo struct {
	// Content is true when a choice's delta carries content, reasoning,
	// refusal or tool-call text: the chunk counts as a token for TTFT and ITL.
	// Role-only and usage-only chunks leave it false.
	Content bool
	// Finish is true when a choice has a non-null finish_reason.
	Finish bool
	// HasUsage is true when the chunk carries a non-null "usage" object.
	HasUsage bool
	Usage    Usage
	// Error is true when the chunk is an error object ({"error": ...}).
	Error bool
}

// ScanChunk reads a chat.completion.chunk JSON object and reports its
// content, finish and usage without allocating. Unknown fields are skipped.
// A malformed object returns an error naming the offset.
func ScanChunk(data []byte) (ChunkInfo, error) {
	panic("implemented below") // placeholder replaced in the same commit
}
