// Package striped provides a counter that many goroutines add to at once
// without contending on one cache line: each addition goes to the padded
// stripe of the processor it runs on, and a read sums them. It suits
// counters on a hot path that are read rarely (statistics), where one
// shared atomic word would make every core wait for the line the others
// just wrote.
package striped
