// Package readme holds the test that loads every YAML example of every
// README.md in the module with the distribution's own component factories,
// providers and converter, and validates it as `otelcol-openhands validate`
// would. How each block is read is said by its fence (readme_test.go).
package readme
