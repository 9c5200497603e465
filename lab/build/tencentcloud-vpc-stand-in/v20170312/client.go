// Package v20170312 is the lab's stand-in for the Tencent Cloud VPC API client (see the
// README of this module): the names flannel's tencentvpc backend uses, each call failing.
package v20170312

import "errors"

var errStandIn = errors.New("Tencent Cloud VPC API: not available in the kwin lab (stand-in module)")

// Client of the VPC API.
type Client struct{}

// NewClientWithSecretId returns a client whose every call fails.
func NewClientWithSecretId(secretID, secretKey, region string) (*Client, error) {
	return &Client{}, errStandIn
}

// Filter of a describe request.
type Filter struct {
	Name   *string
	Values []*string
}

// Route of a route table.
type Route struct {
	DestinationCidrBlock *string
	GatewayType          *string
	GatewayId            *string
	RouteId              *uint64
	RouteDescription     *string
	Enabled              *bool
	RouteType            *string
	RouteTableId         *string
}

// RouteTable of a VPC.
type RouteTable struct {
	VpcId        *string
	RouteTableId *string
	RouteSet     []*Route
}

// DescribeRouteTablesRequest asks for route tables.
type DescribeRouteTablesRequest struct {
	Filters []*Filter
}

// DescribeRouteTablesResponse answers it.
type DescribeRouteTablesResponse struct {
	Response *struct {
		RouteTableSet []*RouteTable
		RequestId     *string
	}
}

// DeleteRoutesRequest deletes routes of a table.
type DeleteRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

// DeleteRoutesResponse answers it.
type DeleteRoutesResponse struct{}

// CreateRoutesRequest creates routes in a table.
type CreateRoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

// CreateRoutesResponse answers it.
type CreateRoutesResponse struct{}

func NewDescribeRouteTablesRequest() *DescribeRouteTablesRequest {
	return &DescribeRouteTablesRequest{}
}
func NewDeleteRoutesRequest() *DeleteRoutesRequest { return &DeleteRoutesRequest{} }
func NewCreateRoutesRequest() *CreateRoutesRequest { return &CreateRoutesRequest{} }

func (c *Client) DescribeRouteTables(*DescribeRouteTablesRequest) (*DescribeRouteTablesResponse, error) {
	return nil, errStandIn
}

func (c *Client) DeleteRoutes(*DeleteRoutesRequest) (*DeleteRoutesResponse, error) {
	return nil, errStandIn
}

func (c *Client) CreateRoutes(*CreateRoutesRequest) (*CreateRoutesResponse, error) {
	return nil, errStandIn
}
