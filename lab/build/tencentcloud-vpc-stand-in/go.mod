// A stand-in for the Tencent Cloud VPC SDK module, which the Go module proxy refuses (403 at
// every version): flanneld imports its Tencent Cloud backend (pkg/backend/tencentvpc)
// unconditionally, so it cannot be built without one. The lab runs flannel's VXLAN backend
// only; this module has just the names that backend refers to, and every call fails.
module github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc

go 1.22
