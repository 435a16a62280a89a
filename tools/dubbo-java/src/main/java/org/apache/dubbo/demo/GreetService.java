package org.apache.dubbo.demo;

import com.google.protobuf.StringValue;

/**
 * The service the Dubbo test providers serve, as the dubbo-go test provider
 * does: google.protobuf.StringValue in and out, so that over Triple a gRPC
 * client calls /org.apache.dubbo.demo.GreetService/Greet (protobuf messages
 * travel unwrapped). The capitalized names are gRPC's; Java's conventional
 * ones are served too.
 */
public interface GreetService {
    StringValue Greet(StringValue name);

    StringValue Hello(StringValue name);

    StringValue greet(StringValue name);

    StringValue hello(StringValue name);
}
