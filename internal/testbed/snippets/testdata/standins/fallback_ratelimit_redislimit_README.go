// Stand-ins for fallback/ratelimit/redislimit/README.md's snippet.
package snippet

import "github.com/redis/go-redis/v9"

var rdb *redis.Client
