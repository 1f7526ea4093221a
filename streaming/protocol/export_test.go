package protocol

// ScanAck is scanAck, for the external tests.
var ScanAck = scanAck
